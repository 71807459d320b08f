"""The LangGraph suite's two long rows: LangGraph's own conformance suite, and a storm.

- ``lg-langgraph-conformance`` (G12): ``langgraph-checkpoint-conformance``'s
  ``validate`` over ``AsyncRulvarSaver``, one fresh location per capability
  suite: every capability detected, none failing, the level FULL. Not run when
  that package is not installed.
- ``lg-storm`` (G2): ``soak.langgraph_storm`` over a fresh location of the
  URL: writer processes hold one thread and invoke a real graph while the kit
  pauses them past the ttl and kills them; the final chain must hold no write of
  a superseded holder, the thread must change hands, and no writer may fail.
  Not run for a location other processes cannot open.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
from collections.abc import AsyncIterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.async_facade import open_async_at
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    build_check,
    not_run,
    require,
)
from rulvar_store.backend import LocationFactory, UrlOpener

__all__ = ["conformance_check", "storm_check"]

CAPABILITIES: Final = frozenset(
    {
        "put",
        "put_writes",
        "get_tuple",
        "list",
        "delete_thread",
        "delete_for_runs",
        "copy_thread",
        "prune",
    }
)
ASYNC_SAVER_TYPE: Any = None
"""The async saver class LangGraph's suite examines (``None``: ``AsyncRulvarSaver``;
a self-test swaps in a broken one)."""
STORM_WRITERS: Final = 3
STORM_S: Final = 4.0
STORM_TTL_MS: Final = 400


async def _validate(locations: LocationFactory) -> dict[str, Any]:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    from rulvar_langgraph import AsyncRulvarSaver

    saver_type = ASYNC_SAVER_TYPE or AsyncRulvarSaver
    with ExitStack() as cleanup:

        @checkpointer_test(name="AsyncRulvarSaver")
        async def fresh_saver() -> AsyncIterator[Any]:
            location = locations()
            cleanup.callback(location.remove)
            opened = await open_async_at(location.opener, None, None, False)
            try:
                yield saver_type.over(opened, owner="conformance")
            finally:
                await opened.aclose()

        report = await validate(fresh_saver)
        result: dict[str, Any] = report.to_dict()
        return result


def _langgraph_conformance(locations: LocationFactory) -> None:
    if importlib.util.find_spec("langgraph.checkpoint.conformance") is None:
        not_run(
            "langgraph-checkpoint-conformance is not installed "
            "(pip install langgraph-checkpoint-conformance)"
        )
    report = asyncio.run(_validate(locations))
    results: dict[str, Any] = report["results"]
    failures = {name: r["failures"] for name, r in results.items() if r["failures"]}
    detected = {name for name, r in results.items() if r["detected"]}
    require(
        not failures,
        f"LangGraph's conformance suite failed (G12): {str(failures)[:600]}",
    )
    require(
        detected >= CAPABILITIES,
        f"capabilities not detected: {sorted(CAPABILITIES - detected)} (G12)",
    )
    require(
        report["conformance_level"] == "FULL",
        f"LangGraph's conformance level is {report['conformance_level']}, not FULL (G12)",
    )


def _storm(locations: LocationFactory) -> None:
    from rulvar_conformance.soak.langgraph_storm import storm_langgraph_thread

    location = locations()
    try:
        if (
            not isinstance(location.opener, UrlOpener)
            or "shared" not in location.features
        ):
            not_run(
                "needs a location other processes open by URL (a memory domain cannot)"
            )
        opener = location.opener
        assert isinstance(opener, UrlOpener)  # not_run above otherwise
        with tempfile.TemporaryDirectory(prefix="rulvar-lg-storm-") as workdir:
            verdict = storm_langgraph_thread(
                opener.url,
                dict(opener.options),
                writers=STORM_WRITERS,
                duration_s=STORM_S,
                ttl_ms=STORM_TTL_MS,
                seed=40,
                workdir=Path(workdir),
            )
    finally:
        location.remove()
    require(
        not verdict.writer_errors, f"storm writers failed: {verdict.writer_errors[:3]}"
    )
    require(
        not verdict.violations,
        f"the final chain holds superseded holders' writes (G2): {verdict.violations[:3]}",
    )
    require(verdict.chain_length > 0, "no checkpoint landed during the storm")
    require(
        len(verdict.epochs) >= 2,
        f"the thread never changed hands in the storm (epochs {verdict.epochs}): "
        "nothing was examined",
    )


def conformance_check(locations: LocationFactory) -> ConformanceCheck:
    return build_check(
        "lg-langgraph-conformance",
        "LangGraph's own checkpointer conformance suite passes at FULL",
        ("G12",),
        partial(_langgraph_conformance, locations),
    )


def storm_check(locations: LocationFactory) -> ConformanceCheck:
    return build_check(
        "lg-storm",
        "writer processes storm one thread under SIGSTOP/SIGKILL; no superseded write lands",
        ("G2", "G4"),
        partial(_storm, locations),
    )
