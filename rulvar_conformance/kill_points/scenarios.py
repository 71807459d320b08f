"""The ten kill-point scenarios (CONTRACT 9.2) and how a write matches one.

A scenario names a workflow, the durable write to die at (``point``), which
side of it (``phase``: ``before`` = die before the call, the write is lost;
``after`` = die once it returned, the write is durable), the occurrence of
that write (counted from 1), and what the child and the resume must spend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from rulvar_conformance.kill_points.driver import KP_HAPPY, KP_LIMIT

__all__ = [
    "KILL_POINT_SCENARIOS",
    "KillPointScenario",
    "Phase",
    "Point",
    "Site",
    "scenario_by_id",
    "write_point",
]

Point = Literal["running", "ok-terminal", "limit-terminal", "settle", "meta"]
Phase = Literal["before", "after"]
Site = Literal["append", "putMeta"]

HAPPY_VALUE: Final = {"one": "alpha", "two": "beta"}
LIMIT_VALUE: Final = {"agentStatus": "limit"}


@dataclass(frozen=True)
class KillPointScenario:
    """One row of the 9.2 table."""

    id: str
    workflow: str
    point: Point
    phase: Phase
    occurrence: int
    child_calls: int
    child_tools: int
    resume_calls: int
    resume_tools: int
    limit_terminals: int
    value: Mapping[str, Any]
    note: str = ""


def _row(
    point: Point,
    phase: Phase,
    occurrence: int,
    child: tuple[int, int],
    resume: tuple[int, int],
    note: str,
    *,
    limit: int = 0,
) -> KillPointScenario:
    workflow = KP_LIMIT if point == "limit-terminal" else KP_HAPPY
    prefix = "limit" if workflow == KP_LIMIT else "happy"
    return KillPointScenario(
        id=f"{prefix}-{point}-{phase}",
        workflow=workflow,
        point=point,
        phase=phase,
        occurrence=occurrence,
        child_calls=child[0],
        child_tools=child[1],
        resume_calls=resume[0],
        resume_tools=resume[1],
        limit_terminals=limit,
        value=LIMIT_VALUE if workflow == KP_LIMIT else HAPPY_VALUE,
        note=note,
    )


KILL_POINT_SCENARIOS: Final[tuple[KillPointScenario, ...]] = (
    _row("running", "before", 2, (1, 0), (1, 0), "the lost dispatch runs live"),
    _row("running", "after", 2, (1, 0), (1, 0), "the dangling dispatch redispatches"),
    _row("ok-terminal", "before", 2, (2, 0), (1, 0), "the one at-least-once re-pay"),
    _row("ok-terminal", "after", 2, (2, 0), (0, 0), "the terminal replays"),
    _row("settle", "before", 1, (2, 0), (0, 0), "settle re-appended"),
    _row("settle", "after", 1, (2, 0), (0, 0), "settle not duplicated"),
    _row("meta", "before", 1, (2, 0), (0, 0), "meta-behind healed"),
    _row("meta", "after", 1, (2, 0), (0, 0), "nothing changes"),
    _row(
        "limit-terminal",
        "before",
        1,
        (3, 2),
        (1, 0),
        "restored from the 2nd checkpoint",
        limit=1,
    ),
    _row(
        "limit-terminal",
        "after",
        1,
        (3, 2),
        (3, 2),
        "an unstamped limit in a never-settled run reruns fully",
        limit=2,
    ),
)
"""The 9.2 table, in its order."""


def scenario_by_id(scenario_id: str) -> KillPointScenario:
    """Return the scenario named ``scenario_id``.

    Raises:
        KeyError: no such scenario (the worker raises before any store call).
    """
    for scenario in KILL_POINT_SCENARIOS:
        if scenario.id == scenario_id:
            return scenario
    known = ", ".join(s.id for s in KILL_POINT_SCENARIOS)
    raise KeyError(f"unknown kill-point scenario {scenario_id!r}; known: {known}")


def write_point(site: Site, record: Mapping[str, Any]) -> Point | None:
    """Which matching write (9.2) an ``append`` entry or ``put_meta`` record is."""
    if site == "putMeta":
        return "meta" if record.get("status") != "running" else None
    kind, status = record.get("kind"), record.get("status")
    if kind == "agent" and status == "running":
        return "running"
    if kind == "agent" and "ref" in record:
        if status == "ok":
            return "ok-terminal"
        if status == "limit":
            return "limit-terminal"
        return None
    value = record.get("value")
    if (
        kind == "decision"
        and isinstance(value, Mapping)
        and value.get("decisionType") == "run_settle"
    ):
        return "settle"
    return None
