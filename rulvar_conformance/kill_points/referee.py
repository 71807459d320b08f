"""The kill-point referee (CONTRACT K6, K7): spawn the worker, watch it die, resume.

The worker runs in a real child process over the location (it opens the
location itself). The referee requires a death by SIGKILL at exactly the
scenario's write with the scenario's child spend, then resumes the run over its
OWN handle with the reference driver and checks the documented recovery: the
exact re-pay, contiguous seqs, one ``run_settle`` recording ok, the limit
terminals, the final meta. Running to completion is a violation, never a pass.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.kit import require, same_json
from rulvar_conformance.kill_points.child import KillPointWorkerConfig, encode_opener
from rulvar_conformance.kill_points.driver import ScriptedProvider, run_segment
from rulvar_conformance.kill_points.scenarios import KillPointScenario
from rulvar_conformance.kill_points.spawn import (
    CHILD_TIMEOUT_S,
    ChildRun,
    WarmWorkers,
    spawn_worker,
)
from rulvar_store import LeasableStore, LeaseHeldError
from rulvar_store.backend import StoreLocation, system_clock_ms

__all__ = [
    "CHILD_TIMEOUT_S",
    "RESUME_DEADLINE_MS",
    "WORKER_TTL_MS",
    "KillPointObservation",
    "SkewedClock",
    "run_kill_point_scenario",
]

WORKER_TTL_MS: Final = 2_000
RESUME_DEADLINE_MS: Final = 15_000


class SkewedClock:
    """The wall clock shifted by ``offset_ms``; the referee moves it between calls."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def __call__(self) -> int:
        return system_clock_ms() + self.offset_ms


@dataclass(frozen=True)
class KillPointObservation:
    """What one scenario did (K7): spend on both sides, the journal, the meta."""

    scenario: str
    child_calls: int
    child_tool_executions: int
    resume_calls: int
    resume_tool_executions: int
    journal: tuple[str, ...]
    meta_status: str | None


def _child_violations(scenario: KillPointScenario, run: ChildRun) -> list[str]:
    problems: list[str] = []
    if run.timed_out:
        problems.append(f"the child was still alive after {CHILD_TIMEOUT_S:.0f} s")
    if run.returncode != -signal.SIGKILL:
        finished = [e for e in run.events if e.get("t") == "ran-to-completion"]
        fatal = [e for e in run.events if e.get("t") == "fatal"]
        detail = (
            f" (ran to completion with status {finished[0].get('status')!r})"
            if finished
            else f" (fatal: {fatal[0].get('message')})"
            if fatal
            else ""
        )
        problems.append(
            f"the child exited with {run.returncode}, not by SIGKILL{detail}; "
            f"stderr: {run.stderr.strip() or '(empty)'}"
        )
    kills = [e for e in run.events if e.get("t") == "kill"]
    if len(kills) != 1:
        problems.append(f"expected exactly one kill event, got {len(kills)}")
    elif (kills[0].get("point"), kills[0].get("phase")) != (
        scenario.point,
        scenario.phase,
    ):
        problems.append(
            f"killed at {kills[0].get('point')}/{kills[0].get('phase')}, "
            f"expected {scenario.point}/{scenario.phase}"
        )
    calls = sum(1 for e in run.events if e.get("t") == "call")
    tools = sum(1 for e in run.events if e.get("t") == "tool")
    if (calls, tools) != (scenario.child_calls, scenario.child_tools):
        problems.append(
            f"the child made {calls} calls / {tools} tool runs, expected "
            f"{scenario.child_calls}/{scenario.child_tools}"
        )
    return problems


def _resume(
    location: StoreLocation,
    scenario: KillPointScenario,
    run_id: str,
    ttl_ms: int,
    deadline_ms: int,
    provider: ScriptedProvider,
) -> tuple[object, list[dict[str, Any]], str | None]:
    """Resume over a fresh handle with the store's default ttl (K7).

    With an injectable clock the handle's clock runs one worker ttl ahead, so the
    dead owner's lease is already expired; without one the resume polls until it
    expires (a refused attempt writes nothing).
    """
    clock = SkewedClock(ttl_ms + 1) if location.clock else None
    with location.open(None, now=clock) as opened:
        store: LeasableStore = opened.journal  # type: ignore[assignment]  # leasable
        deadline = time.monotonic() + deadline_ms / 1000
        interval_s = max(50, math.ceil(ttl_ms / 3)) / 1000
        while True:
            try:
                outcome = run_segment(
                    store, opened.transcripts, run_id, scenario.workflow, provider
                )
                break
            except LeaseHeldError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(interval_s)
        entries = store.load(run_id)
        meta = store.get_meta(run_id) if hasattr(store, "get_meta") else None
        return outcome, entries, None if meta is None else meta.get("status")


def _journal_violations(
    scenario: KillPointScenario, entries: list[dict[str, Any]]
) -> list[str]:
    problems: list[str] = []
    seqs = [e.get("seq") for e in entries]
    first = seqs[0] if seqs else None
    if not isinstance(first, int) or any(
        not isinstance(s, int) or s != first + i for i, s in enumerate(seqs)
    ):
        problems.append(f"seqs are not contiguous: {seqs}")
    settles = [
        e
        for e in entries
        if e.get("kind") == "decision"
        and isinstance(e.get("value"), dict)
        and e["value"].get("decisionType") == "run_settle"
    ]
    statuses = [s["value"].get("runStatus") for s in settles]
    if statuses != ["ok"]:
        problems.append(f"expected exactly one run_settle recording ok, got {statuses}")
    limits = sum(
        1
        for e in entries
        if e.get("kind") == "agent" and e.get("status") == "limit" and "ref" in e
    )
    if limits != scenario.limit_terminals:
        problems.append(
            f"{limits} limit terminals in the journal, expected "
            f"{scenario.limit_terminals}"
        )
    return problems


def run_kill_point_scenario(
    location: StoreLocation,
    scenario: KillPointScenario,
    workdir: Path,
    *,
    ttl_ms: int = WORKER_TTL_MS,
    resume_deadline_ms: int = RESUME_DEADLINE_MS,
    exec_args: Sequence[str] = (),
    workers: WarmWorkers | None = None,
) -> KillPointObservation:
    """Kill a worker at the scenario's write, resume, check the table row (K6, K7).

    ``workers`` hands the case to a child started ahead (same command, config on
    stdin); without it a child is started now. Every violation found is
    reported at once through the running check.
    """
    run_id = f"kp-{scenario.id}"
    report = workdir / f"kill-report-{scenario.id}.jsonl"
    config = KillPointWorkerConfig(
        store_path=location.name,
        run_id=run_id,
        ttl_ms=ttl_ms,
        report_path=str(report),
        scenario_id=scenario.id,
        opener=encode_opener(location.opener),
    )
    child = (
        workers.run(config)
        if workers is not None
        else spawn_worker(config, exec_args=exec_args)
    )
    problems = _child_violations(scenario, child)
    require(not problems, f"{scenario.id}: " + "; ".join(problems))
    provider = ScriptedProvider()
    outcome, entries, meta_status = _resume(
        location, scenario, run_id, ttl_ms, resume_deadline_ms, provider
    )
    problems = _journal_violations(scenario, entries)
    status = getattr(outcome, "status", None)
    if status != "ok":
        problems.append(f"the resume settled {status!r}, expected 'ok'")
    value = getattr(outcome, "value", None)
    if not same_json(value, dict(scenario.value)):
        problems.append(f"the resumed value is {value!r}, expected {scenario.value!r}")
    spend = (provider.calls, provider.tool_runs)
    if spend != (scenario.resume_calls, scenario.resume_tools):
        problems.append(
            f"the resume made {spend[0]} calls / {spend[1]} tool runs, expected "
            f"{scenario.resume_calls}/{scenario.resume_tools} ({scenario.note})"
        )
    if meta_status != "ok":
        problems.append(f"the final meta status is {meta_status!r}, expected 'ok'")
    require(not problems, f"{scenario.id}: " + "; ".join(problems))
    return KillPointObservation(
        scenario=scenario.id,
        child_calls=scenario.child_calls,
        child_tool_executions=scenario.child_tools,
        resume_calls=provider.calls,
        resume_tool_executions=provider.tool_runs,
        journal=tuple(f"{e.get('kind')}:{e.get('status')}" for e in entries),
        meta_status=meta_status,
    )
