"""Helpers shared by the SqliteStore tests (conftest puts the project root on sys.path)."""

from __future__ import annotations

from typing import Any


class Clock:
    """A hand-moved clock in Unix ms, shared by the handles of one test (D8)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, delta_ms: int) -> None:
        self.ms += delta_ms


def entry(seq: Any, **extra: Any) -> dict[str, Any]:
    """A minimal journal entry with the given seq."""
    return {"seq": seq, "kind": "step", "status": "ok", **extra}


def meta(run_id: str, status: str, **extra: Any) -> dict[str, Any]:
    """A minimal RunMeta."""
    return {"runId": run_id, "status": status, "updatedAt": "t", **extra}
