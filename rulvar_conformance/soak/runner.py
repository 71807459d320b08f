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
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance._kit import ConformanceFailure
from rulvar_conformance.soak.config import CONFIG_ENV, DEFAULT_SOAK_RUNS, SoakWriterConfig
from rulvar_conformance.soak.events import Event, monotonic_ns, read_events, unfinished_ids
from rulvar_conformance.soak.referee import referee_history
from rulvar_conformance.soak.tally import DEFAULT_SOAK_QUORUM, ActivityTally, SoakQuorum, health_report
from rulvar_store import ConfigError, StoreLocation

__all__ = ["ChaosPlan", "SoakFailure", "SoakResult", "run_multi_process_soak"]

POLL_S: Final = 0.1
EXIT_WAIT_S: Final = 30.0
STDERR_CHARS: Final = 2000


@dataclass(frozen=True)
class ChaosPlan:
    """Faults the referee injects from outside the writers, bounded in count.

    Pauses last ``pause_ttls`` (a range, in lease ttls) so some end before the
    lease expires and some long after; actions are ``interval_ms`` apart on average.
    """

    pauses: int = 0
    kills: int = 0
    interval_ms: int = 1000
    pause_ttls: tuple[float, float] = (0.3, 4.0)


@dataclass
class SoakResult:
    """What a soak did and found (S10, plus chaos and health)."""

    activity: dict[str, int]
    storm_ms: float
    journal_entries: int
    violations: list[str]
    events: list[Event]
    chaos: list[Event] = field(default_factory=list)
    unknown: list[dict[str, Any]] = field(default_factory=list)
    health: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    report_dir: str | None = None


class SoakFailure(ConformanceFailure):
    """``store-conformance multi-process-soak: <n> violation(s)`` and one bullet each."""

    def __init__(self, result: SoakResult) -> None:
        bullets = "\n".join(f"- {line}" for line in result.violations)
        super().__init__("multi-process-soak", f"{len(result.violations)} violation(s)\n{bullets}")
        self.result = result


@dataclass
class _Writer:
    index: int
    incarnation: int
    process: subprocess.Popen[bytes]
    log: Path
    stderr: Path
    offset: int = 0
    events: list[Event] = field(default_factory=list)
    paused_until: float | None = None
    killed: bool = False


class _Storm:
    """The live state of one soak: processes, records, chaos, counts."""

    def __init__(self, workdir: Path, location_path: Path, base: SoakWriterConfig,
                 rng: random.Random) -> None:
        self.workdir, self.location_path, self.base, self.rng = workdir, location_path, base, rng
        self.stop_path = workdir / "soak-stop"
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.writers: dict[int, _Writer] = {}
        self.retired: list[_Writer] = []
        self.chaos: list[Event] = []
        self.tally = ActivityTally()
        self.violations: list[str] = []

    def record(self, kind: str, writer: _Writer, **more: Any) -> None:
        event = {"t": kind, "w": writer.index, "inc": writer.incarnation, "ns": monotonic_ns(),
                 "pid": writer.process.pid, **more}
        self.chaos.append(event)
        self.tally.add(event)

    def spawn(self, index: int, incarnation: int) -> None:
        name = f"w{index}.{incarnation}"
        config = dataclasses.replace(
            self.base, writer=index, incarnation=incarnation,
            report_path=str(self.logs / f"{name}.jsonl"), stop_path=str(self.stop_path),
            location_path=str(self.location_path),
        )
        stderr = self.logs / f"{name}.stderr"
        with stderr.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "rulvar_conformance.soak.writer"],
                env={**os.environ, CONFIG_ENV: config.to_env()},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            )
        writer = _Writer(index, incarnation, process, Path(config.report_path), stderr)
        self.writers[index] = writer
        self.record("spawn", writer)

    def drain(self, writer: _Writer) -> None:
        events, writer.offset = read_events(writer.log, writer.offset)
        writer.events.extend(events)
        for event in events:
            self.tally.add(event)

    def inside(self, writer: _Writer) -> str | None:
        """The call a stopped or dead writer was in, from its frozen log tail."""
        self.drain(writer)
        open_calls = unfinished_ids(writer.events[-3:])
        return next((str(call.get("op")) for call in open_calls.values()), None)

    def pause(self, writer: _Writer, ttl_ms: int, plan: ChaosPlan) -> None:
        low, high = plan.pause_ttls
        hold_s = self.rng.uniform(low, high) * ttl_ms / 1000.0
        writer.process.send_signal(signal.SIGSTOP)
        writer.paused_until = time.monotonic() + hold_s
        self.record("pause", writer, inside=self.inside(writer), hold_ms=round(hold_s * 1000))

    def resume(self, writer: _Writer) -> None:
        writer.process.send_signal(signal.SIGCONT)
        writer.paused_until = None
        self.record("resume", writer)

    def kill(self, writer: _Writer) -> None:
        writer.process.send_signal(signal.SIGKILL)
        writer.process.wait()
        writer.killed = True
        self.record("kill", writer, inside=self.inside(writer))
        self.retired.append(writer)
        self.spawn(writer.index, writer.incarnation + 1)

    def all_writers(self) -> list[_Writer]:
        return [*self.retired, *self.writers.values()]

    def exited_early(self) -> None:
        for writer in list(self.writers.values()):
            code = writer.process.poll()
            if code is not None and not self.stop_path.exists():
                self.drain(writer)
                self.violations.append(
                    f"WRITER EXITED: w{writer.index}.{writer.incarnation} exited {code} during the storm: "
                    f"{_tail(writer.stderr)}"
                )
                del self.writers[writer.index]
                self.retired.append(writer)


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-STDERR_CHARS:].strip() or "(no stderr)"
    except FileNotFoundError:
        return "(no stderr)"


def _chaos_step(storm: _Storm, plan: ChaosPlan, done: dict[str, int], ttl_ms: int) -> None:
    left = [kind for kind in ("pause", "kill") if done[kind] < getattr(plan, kind + "s")]
    running = [w for w in storm.writers.values() if w.paused_until is None]
    paused = len(storm.writers) - len(running)
    if not left or not running:
        return
    kind = storm.rng.choice(left)
    if kind == "pause" and paused >= max(1, len(storm.writers) // 2):
        return
    target = storm.rng.choice(running)
    if kind == "pause":
        storm.pause(target, ttl_ms, plan)
    else:
        storm.kill(target)
    done[kind] += 1


def run_multi_process_soak(
    location: StoreLocation,
    *,
    writers: int = 3,
    seconds: float = 60.0,
    seed: int = 1,
    ttl_ms: int = 250,
    runs: Sequence[str] = DEFAULT_SOAK_RUNS,
    chaos: ChaosPlan = ChaosPlan(),
    quorum: SoakQuorum = DEFAULT_SOAK_QUORUM,
    report_dir: str | os.PathLike[str] | None = None,
    on_progress: Callable[[float, dict[str, int]], None] | None = None,
    raise_on_violation: bool = True,
) -> SoakResult:
    """Storm ``location`` with ``writers`` processes until ``quorum`` (or ``seconds``, a violation).

    Writers open the location themselves (bare, all at once), so the location must
    declare ``processes``. ``report_dir`` keeps the writers' logs and the runner's
    chaos records; without it they go to a temporary directory that is removed.

    Raises:
        ConfigError: the location cannot be opened in a child process, or bad settings.
        SoakFailure: any violation (one error listing all, S10), unless
            ``raise_on_violation`` is false; ``.result`` holds the full result.
    """
    if not location.processes:
        raise ConfigError(
            f"location {location.name!r} cannot be soaked: it does not open in a spawned "
            "child process (processes=False); soak a file or server backend instead"
        )
    if writers < 1 or seconds <= 0 or ttl_ms < 1 or not runs:
        raise ConfigError("soak needs writers >= 1, seconds > 0, ttl_ms >= 1 and at least one run")
    import dill

    scratch = None if report_dir is not None else tempfile.TemporaryDirectory(prefix="rulvar-soak-")
    workdir = Path(report_dir) if report_dir is not None else Path(scratch.name)  # type: ignore[union-attr]  # one of the two is set
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        location_path = workdir / "location.dill"
        with location_path.open("wb") as handle:
            dill.dump(dataclasses.replace(location, cleanup=None), handle, recurse=True)
        base = SoakWriterConfig(writer=0, incarnation=0, seed=seed, ttl_ms=ttl_ms,
                                runs=tuple(runs), sys_path=tuple(p for p in sys.path if p))
        storm = _Storm(workdir, location_path, base, random.Random(seed))
        settings = {"location": location.name, "writers": writers, "seconds": seconds, "seed": seed,
                    "ttl_ms": ttl_ms, "runs": list(runs), "chaos": dataclasses.asdict(chaos),
                    "quorum": dataclasses.asdict(quorum)}
        result = _storm(storm, location, writers, seconds, ttl_ms, chaos, quorum, on_progress, settings)
        if report_dir is not None:
            result.report_dir = str(workdir)
            from rulvar_conformance.soak.report import write_report

            write_report(result, workdir)
    finally:
        if scratch is not None:
            scratch.cleanup()
    if result.violations and raise_on_violation:
        raise SoakFailure(result)
    return result


def _storm(storm: _Storm, location: StoreLocation, writers: int, seconds: float, ttl_ms: int,
           chaos: ChaosPlan, quorum: SoakQuorum,
           on_progress: Callable[[float, dict[str, int]], None] | None,
           settings: dict[str, Any]) -> SoakResult:
    started = time.monotonic()
    start_ns = monotonic_ns()
    for index in range(writers):
        storm.spawn(index, 0)
    done = {"pause": 0, "kill": 0}
    next_chaos = started + storm.rng.uniform(0.5, 1.5) * chaos.interval_ms / 1000.0
    while True:
        time.sleep(POLL_S)
        now = time.monotonic()
        for writer in list(storm.writers.values()):
            storm.drain(writer)
            if writer.paused_until is not None and now >= writer.paused_until:
                storm.resume(writer)
        storm.exited_early()
        if now >= next_chaos:
            _chaos_step(storm, chaos, done, ttl_ms)
            next_chaos = now + storm.rng.uniform(0.5, 1.5) * chaos.interval_ms / 1000.0
        activity = storm.tally.snapshot()
        if on_progress is not None:
            on_progress(now - started, activity)
        missing = quorum.missing(activity)
        if not missing:
            break
        if now - started >= seconds or not storm.writers:
            storm.violations.append(
                f"QUORUM NOT REACHED: stopped at the {seconds:g} s cap still missing {', '.join(missing)}"
            )
            break
    storm_ms = (time.monotonic() - started) * 1000.0
    stop_ns = monotonic_ns()
    _stop(storm)
    events = [event for writer in storm.all_writers() for event in writer.events]
    opened = location.open(ttl_ms)
    try:
        verdict = referee_history(opened.journal, opened.transcripts, events, settings["runs"])
        journal_entries = sum(len(opened.journal.load(run)) for run in settings["runs"])
    finally:
        opened.close()
    return SoakResult(
        activity=storm.tally.snapshot(), storm_ms=storm_ms, journal_entries=journal_entries,
        violations=storm.violations + verdict.violations, events=events, chaos=storm.chaos,
        unknown=verdict.unknown, health=health_report(events, storm.chaos, start_ns, stop_ns),
        settings=settings,
    )


def _stop(storm: _Storm) -> None:
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
                f"STRAGGLER: w{writer.index}.{writer.incarnation} did not exit within {EXIT_WAIT_S:g} s "
                "of the stop file and was SIGKILLed"
            )
            code = None
        if code not in (0, None):
            storm.violations.append(
                f"WRITER EXIT {code}: w{writer.index}.{writer.incarnation}: {_tail(writer.stderr)}"
            )
        storm.drain(writer)
