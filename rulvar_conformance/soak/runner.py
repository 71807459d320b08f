"""``run_multi_process_soak``: real writer processes, chaos from outside, one verdict (S7-S10).

The runner is thin: it ships the location to writer processes (dill, so a store
author's closure travels), lets them boot the store at once, counts their records
every 100 ms, pauses (SIGSTOP/SIGCONT) and kills (SIGKILL, then a respawn with a new
incarnation) writers at times drawn from a seeded PRNG, stops at the quorum or the
cap, and hands the records and the store's final state to the pure referee.
"""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rulvar_conformance.harness.deadline import CheckTimedOut, run_with_deadline
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_conformance.harness.processes import ship_location
from rulvar_conformance.soak.companions import (
    CompanionCheck,
    companion_runs_in,
    verify_companions,
)
from rulvar_conformance.soak.config import (
    DEFAULT_SOAK_RUNS,
    SoakWriterConfig,
)
from rulvar_conformance.soak.events import (
    Event,
    monotonic_ns,
)
from rulvar_conformance.soak.referee import RefereeVerdict, judge_soak, soak_run_ids
from rulvar_conformance.soak.snapshot import FinalState, read_final_state
from rulvar_conformance.soak.storm import ChaosPlan, Storm, chaos_step, tail_of
from rulvar_conformance.soak.summary import SoakActivity, SoakSummary
from rulvar_conformance.soak.tally import (
    DEFAULT_SOAK_QUORUM,
    SoakQuorum,
    health_report,
)
from rulvar_conformance.soak.violations import Violation, violation
from rulvar_store import ConfigError, MetaLookupStore
from rulvar_store.backend import StoreLocation

if TYPE_CHECKING:
    from rulvar_conformance.faults.chaos import FaultDriver
    from rulvar_conformance.soak.profiles import SoakProfile

__all__ = [
    "ChaosPlan",
    "SoakFailure",
    "SoakResult",
    "run_multi_process_soak",
    "run_profile_soak",
]

POLL_S: Final = 0.1
READ_DEADLINE_S: Final = 300.0
"""Bound on reading the final state: minutes of margin over the seconds it takes."""
EXIT_WAIT_S: Final = 30.0
NO_CHAOS: Final = ChaosPlan()


@dataclass(frozen=True)
class SoakResult:
    """What a soak did and found (S10): the typed summary plus every raw record."""

    summary: SoakSummary
    events: list[Event]
    chaos: list[Event] = field(default_factory=list)
    report_dir: str | None = None

    @property
    def violations(self) -> tuple[Violation, ...]:
        return self.summary.violations

    @property
    def activity(self) -> SoakActivity:
        return self.summary.activity

    @property
    def journal_entries(self) -> int:
        return self.summary.journal_entries


class SoakFailure(ConformanceFailure):
    """``store-conformance multi-process-soak: <verdict>``: violations grouped, or the quorum missed."""

    def __init__(self, result: SoakResult) -> None:
        lines = result.summary.verdict_lines()
        prefix = "store-conformance multi-process-soak: "
        head = lines[0].removeprefix(prefix)
        super().__init__("multi-process-soak", "\n".join([head, *lines[1:]]))
        self.result = result


def run_profile_soak(
    location: StoreLocation,
    profile: SoakProfile,
    *,
    writers: int | None = None,
    seconds: float | None = None,
    seed: int | None = None,
    companions: int | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[float, SoakActivity], None] | None = None,
    faults: FaultDriver | None = None,
    outage_s: float = 0.0,
) -> SoakResult:
    """``run_multi_process_soak`` at ``profile``'s sizes; the result holds any violation.

    ``writers`` and ``seconds`` replace the profile's when given and not zero,
    ``seed`` and ``companions`` when not None, so the CLI and the fault soak size
    a soak from a profile the same way.
    """
    return run_multi_process_soak(
        location,
        writers=writers or profile.writers,
        seconds=seconds or profile.seconds,
        seed=profile.seed if seed is None else seed,
        ttl_ms=profile.ttl_ms,
        runs=profile.runs,
        chaos=profile.chaos,
        quorum=profile.quorum,
        report_dir=report_dir,
        on_progress=on_progress,
        raise_on_violation=False,
        companions=profile.companions if companions is None else companions,
        faults=faults,
        outage_s=outage_s,
    )


def run_multi_process_soak(
    location: StoreLocation,
    *,
    writers: int = 3,
    seconds: float = 60.0,
    seed: int = 1,
    ttl_ms: int = 250,
    runs: Sequence[str] = DEFAULT_SOAK_RUNS,
    chaos: ChaosPlan = NO_CHAOS,
    quorum: SoakQuorum = DEFAULT_SOAK_QUORUM,
    report_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[float, SoakActivity], None] | None = None,
    raise_on_violation: bool = True,
    companions: int = 0,
    faults: FaultDriver | None = None,
    outage_s: float = 0.0,
) -> SoakResult:
    """Storm ``location`` with ``writers`` processes until ``quorum`` (or ``seconds``, a violation).

    Writers open the location themselves (bare, all at once), so the location must
    declare ``processes``. ``report_dir`` keeps the writers' logs and the runner's
    chaos records; without it they go to a temporary directory that is removed.
    ``companions``: threads per writer process appending to runs of their own
    through the writer's handle, each held to its log afterwards
    (``soak.companions``), so a store that batches one handle's callers is
    soaked batching. ``faults``: a fault layer (``rulvar_conformance.faults``)
    that places the writers on hosts and cuts, resets or kills what lies between
    them and the store; ``outage_s``: how long a writer's reads keep retrying a
    store that is unavailable (0: the default rounds only).

    Raises:
        ConfigError: the location cannot be opened in a child process, or bad settings.
        SoakFailure: any violation (one error listing all, S10), or the cap
            reached before the quorum, unless ``raise_on_violation`` is false;
            ``.result`` holds the full result.
    """
    if not location.processes:
        raise ConfigError(
            f"location {location.name!r} cannot be soaked: it does not open in a spawned "
            "child process (processes=False); soak a file or server backend instead"
        )
    if writers < 1 or seconds <= 0 or ttl_ms < 1 or not runs or companions < 0:
        raise ConfigError(
            "soak needs writers >= 1, seconds > 0, ttl_ms >= 1, at least one run "
            "and companions >= 0"
        )
    scratch = (
        None
        if report_dir is not None
        else tempfile.TemporaryDirectory(prefix="rulvar-soak-")
    )
    workdir = Path(report_dir) if report_dir is not None else Path(scratch.name)  # type: ignore[union-attr]  # one of the two is set
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        location_path = workdir / "location.dill"
        ship_location(location, location_path)
        base = SoakWriterConfig(
            writer=0,
            incarnation=0,
            seed=seed,
            ttl_ms=ttl_ms,
            runs=tuple(runs),
            sys_path=tuple(p for p in sys.path if p),
            companions=companions,
            outage_s=outage_s,
        )
        storm = Storm(workdir, location_path, base, random.Random(seed))
        if faults is not None:
            storm.launcher = faults.launch
        settings = {
            "location": location.name,
            "writers": writers,
            "seconds": seconds,
            "seed": seed,
            "ttl_ms": ttl_ms,
            "runs": list(runs),
            "companions": companions,
            "chaos": dataclasses.asdict(chaos),
            "quorum": dataclasses.asdict(quorum),
        }
        if faults is not None:
            settings["faults"] = {
                **faults.describe(),
                **dataclasses.asdict(faults.plan),
            }
        result = _storm(
            storm,
            location,
            writers,
            seconds,
            ttl_ms,
            chaos,
            quorum,
            on_progress,
            settings,
            faults,
        )
        if report_dir is not None:
            result = dataclasses.replace(result, report_dir=str(workdir))
            from rulvar_conformance.soak.report import write_report

            write_report(result, workdir)
    finally:
        # The pickled location may carry a URL with a password: never leave it.
        (workdir / "location.dill").unlink(missing_ok=True)
        (workdir / "soak-stop").unlink(missing_ok=True)
        if scratch is not None:
            scratch.cleanup()
    if result.summary.outcome != "passed" and raise_on_violation:
        raise SoakFailure(result)
    return result


def _storm(
    storm: Storm,
    location: StoreLocation,
    writers: int,
    seconds: float,
    ttl_ms: int,
    chaos: ChaosPlan,
    quorum: SoakQuorum,
    on_progress: Callable[[float, SoakActivity], None] | None,
    settings: dict[str, Any],
    faults: FaultDriver | None = None,
) -> SoakResult:
    started = time.monotonic()
    start_ns = monotonic_ns()
    for index in range(writers):
        storm.spawn(index, 0)
    done = {"pause": 0, "kill": 0}
    next_chaos = started + storm.rng.uniform(0.5, 1.5) * chaos.interval_ms / 1000.0
    next_fault = started + (faults.plan.interval_ms / 1000.0 if faults else 0.0)
    while True:
        time.sleep(POLL_S)
        now = time.monotonic()
        for writer in list(storm.writers.values()):
            storm.drain(writer)
            if writer.paused_until is not None and now >= writer.paused_until:
                storm.resume(writer)
        storm.exited_early()
        if now >= next_chaos:
            chaos_step(storm, chaos, done, ttl_ms)
            next_chaos = now + storm.rng.uniform(0.5, 1.5) * chaos.interval_ms / 1000.0
        if faults is not None:
            faults.tick(storm)
            if now >= next_fault:
                faults.step(storm)
                next_fault = (
                    now + storm.rng.uniform(0.5, 1.5) * faults.plan.interval_ms / 1000.0
                )
        activity = storm.tally.snapshot()
        if on_progress is not None:
            on_progress(now - started, activity)
        missing = quorum.missing(activity) + (faults.missing() if faults else [])
        # No writer left means each exit was recorded as a violation already.
        if not missing or now - started >= seconds or not storm.writers:
            break
    storm_ms = (time.monotonic() - started) * 1000.0
    stop_ns = monotonic_ns()
    if faults is not None:
        faults.settle(storm)  # heal and restart first, so every writer can stop
    _stop(storm)
    events = [event for writer in storm.all_writers() for event in writer.events]
    runs = settings["runs"]
    read_ids = [*soak_run_ids(events, runs), *companion_runs_in(storm.logs)]
    snapshot: list[FinalState] = []

    def read() -> None:
        opened = location.open(ttl_ms)
        try:
            if not isinstance(opened.journal, MetaLookupStore):
                raise ConfigError(
                    f"location {location.name!r} cannot be soaked: its journal has no get_meta"
                )
            snapshot.append(
                read_final_state(opened.journal, opened.transcripts, read_ids)
            )
        finally:
            opened.close()

    try:
        # A store that hangs on its reads must not hang the soak's verdict.
        run_with_deadline("multi-process-soak", read, READ_DEADLINE_S)
    except CheckTimedOut as exc:
        storm.violations.append(
            violation(
                f"FINAL STATE UNREADABLE: the store did not answer the referee's reads "
                f"in {READ_DEADLINE_S:g} s after every writer had stopped; {exc.detail}"
            )
        )
    # Judged from the snapshot alone: no store handle is open past this point.
    # Nothing read is nothing judged (an empty state would read as lost writes).
    verdict, company, journal_entries = RefereeVerdict(), CompanionCheck(), 0
    for state in snapshot:
        verdict = judge_soak(state, events, runs)
        journal_entries = sum(len(state.run(run).entries) for run in runs)
        company = verify_companions(state, storm.logs)
    violations = [*storm.violations, *verdict.violations, *company.violations]
    fault_figures: dict[str, Any] = {}
    if faults is not None:
        from rulvar_conformance.faults.judge import judge_faults

        fault_figures, found = judge_faults(
            events, storm.chaos, verdict.unknown, stop_ns, violations
        )
        violations.extend(found)
        # Every writer has exited and the referee's handle is closed: what the
        # server still holds for them has leaked.
        more, leaked = faults.finish()
        rows = [*fault_figures["rows"], *more.pop("rows", [])]
        fault_figures.update(more, rows=rows)
        violations.extend(leaked)
    activity = dataclasses.replace(
        storm.tally.snapshot(),
        companion_runs=company.runs,
        companion_appends=company.appends,
    )
    summary = SoakSummary(
        settings=settings,
        activity=activity,
        health=health_report(events, storm.chaos, start_ns, stop_ns),
        storm_ms=storm_ms,
        journal_entries=journal_entries,
        violations=tuple(violations),
        quorum_missing=tuple(missing),
        unknown=tuple(verdict.unknown),
        faults=fault_figures,
    )
    return SoakResult(summary=summary, events=events, chaos=storm.chaos)


def _stop(storm: Storm) -> None:
    """Resume the paused, raise the stop file, wait for exits; kill and flag stragglers."""
    for writer in storm.writers.values():
        if writer.paused_until is not None:
            storm.resume(writer)
    storm.stop_path.touch()
    deadline = time.monotonic() + EXIT_WAIT_S
    for writer in storm.writers.values():
        try:
            code = writer.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            writer.process.kill()
            writer.process.wait()
            storm.violations.append(
                violation(
                    f"STRAGGLER: w{writer.index}.{writer.incarnation} did not exit within {EXIT_WAIT_S:g} s "
                    "of the stop file and was SIGKILLed"
                )
            )
            code = None
        if code not in (0, None):
            storm.violations.append(
                violation(
                    f"WRITER EXIT: w{writer.index}.{writer.incarnation} exited {code}: {tail_of(writer.stderr)}"
                )
            )
        storm.drain(writer)
