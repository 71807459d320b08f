"""Checks whose row says what they did (faults injected, what survived)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from rulvar_conformance.harness.kit import ConformanceCheck, build_check

__all__ = ["noted_check"]


def noted_check(
    check_id: str,
    title: str,
    clauses: Sequence[str],
    body: Callable[[list[str]], None],
) -> ConformanceCheck:
    """A check whose ``body`` appends lines to what its report row shows.

    The lines stay on a failure too: the figures of a failed run are the
    first thing a reader needs.
    """
    said: list[str] = []

    def run() -> None:
        said.clear()
        body(said)

    def note() -> str | None:
        return "; ".join(said) or None

    return replace(build_check(check_id, title, clauses, run), note=note)
