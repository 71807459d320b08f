"""The soak's processes: spawning writers, reading their logs, pausing and killing them.

``Storm`` owns the live writer processes of one soak. Chaos comes from outside:
SIGSTOP (held for a random share of the ttl, then SIGCONT) and SIGKILL followed
by a respawn with the next incarnation, which logs under a new owner. Each
action is recorded with the monotonic clock and, read from the victim's frozen
log tail, the store call it landed in.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.processes import start_module
from rulvar_conformance.soak.config import CONFIG_ENV, SoakWriterConfig
from rulvar_conformance.soak.events import (
    Event,
    monotonic_ns,
    read_events,
    unfinished_ids,
)
from rulvar_conformance.soak.tally import ActivityTally
from rulvar_conformance.soak.violations import Violation, violation

__all__ = ["ChaosPlan", "Storm", "WriterProcess", "chaos_step", "tail_of"]

STDERR_CHARS: Final = 2000
AIM_S: Final = 1.0
"""How long an aimed pause watches its target's log for an open write transaction."""


def _wait_for_transaction(log: Path, limit_s: float) -> None:
    """Spin until the log's last line is the writer's in-transaction record, or the limit.

    The writer holds an announced transaction open for ``AIM_HOLD_S``; polling
    every millisecond catches it.
    """
    deadline = time.monotonic() + limit_s
    try:
        fd = os.open(log, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        while time.monotonic() < deadline:
            size = os.fstat(fd).st_size
            tail = os.pread(fd, 160, max(0, size - 160))
            last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
            if b'"t":"txn"' in last:
                return
            time.sleep(0.001)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ChaosPlan:
    """Faults the referee injects from outside the writers, bounded in count.

    Pauses last ``pause_ttls`` (a range, in lease ttls) so some end before the
    lease expires and some long after; actions are ``interval_ms`` apart on average.
    Every ``aim_every``-th pause (the first included) is aimed: it waits (up to a
    second) for an even writer to announce a write transaction and lands inside it.
    """

    pauses: int = 0
    kills: int = 0
    interval_ms: int = 1000
    pause_ttls: tuple[float, float] = (0.3, 4.0)
    aim_every: int = 2


@dataclass
class WriterProcess:
    index: int
    incarnation: int
    process: subprocess.Popen[bytes]
    log: Path
    stderr: Path
    offset: int = 0
    events: list[Event] = field(default_factory=list)
    paused_until: float | None = None
    killed: bool = False


class Storm:
    """The live state of one soak: processes, records, chaos, counts."""

    def __init__(
        self,
        workdir: Path,
        location_path: Path,
        base: SoakWriterConfig,
        rng: random.Random,
    ) -> None:
        self.workdir, self.location_path, self.base, self.rng = (
            workdir,
            location_path,
            base,
            rng,
        )
        self.stop_path = workdir / "soak-stop"
        self.logs = workdir / "logs"
        # A reused report folder holds an earlier soak's logs, which writers and
        # companions append to: read back, they would mix two soaks' records.
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        self.writers: dict[int, WriterProcess] = {}
        self.retired: list[WriterProcess] = []
        self.chaos: list[Event] = []
        self.tally = ActivityTally()
        self.violations: list[Violation] = []
        # Where writer i runs and what it is told (a fault layer's hosts); none: here.
        self.launcher: Callable[[int], tuple[list[str], dict[str, str]]] | None = None

    def record(self, kind: str, writer: WriterProcess, **more: Any) -> None:
        event = {
            "t": kind,
            "w": writer.index,
            "inc": writer.incarnation,
            "ns": monotonic_ns(),
            "pid": writer.process.pid,
            **more,
        }
        self.chaos.append(event)
        self.tally.add(event)

    def spawn(self, index: int, incarnation: int) -> None:
        name = f"w{index}.{incarnation}"
        config = dataclasses.replace(
            self.base,
            writer=index,
            incarnation=incarnation,
            report_path=str(self.logs / f"{name}.jsonl"),
            stop_path=str(self.stop_path),
            location_path=str(self.location_path),
        )
        stderr = self.logs / f"{name}.stderr"
        prefix, extra = self.launcher(index) if self.launcher else ([], {})
        with stderr.open("wb") as err:
            process = start_module(
                "rulvar_conformance.soak.writer",
                env={**extra, CONFIG_ENV: config.to_env()},
                host=prefix,
                stderr=err,
            )
        writer = WriterProcess(
            index, incarnation, process, Path(config.report_path), stderr
        )
        self.writers[index] = writer
        self.record("spawn", writer)

    def drain(self, writer: WriterProcess) -> None:
        events, writer.offset = read_events(writer.log, writer.offset)
        writer.events.extend(events)
        for event in events:
            self.tally.add(event)

    def inside(self, writer: WriterProcess) -> tuple[str | None, bool]:
        """The call a stopped or dead writer was in, and whether inside its write
        transaction (its frozen log ends with the ``txn`` record written there)."""
        self.drain(writer)
        tail = writer.events[-3:]
        if tail and tail[-1].get("t") == "txn":
            return str(tail[-1].get("op")), True
        open_calls = unfinished_ids(tail)
        return next((str(call.get("op")) for call in open_calls.values()), None), False

    def pause(
        self, writer: WriterProcess, ttl_ms: int, plan: ChaosPlan, *, aimed: bool
    ) -> None:
        """SIGSTOP ``writer`` for a random share of ttls; ``aimed``: inside a transaction."""
        low, high = plan.pause_ttls
        hold_s = self.rng.uniform(low, high) * ttl_ms / 1000.0
        if aimed:
            aim = self.workdir / f"aim-w{writer.index}"
            aim.touch()
            try:
                _wait_for_transaction(writer.log, AIM_S)
            finally:
                aim.unlink()
        writer.process.send_signal(signal.SIGSTOP)
        writer.paused_until = time.monotonic() + hold_s
        inside, txn = self.inside(writer)
        self.record(
            "pause",
            writer,
            inside=inside,
            txn=txn,
            aimed=aimed,
            hold_ms=round(hold_s * 1000),
        )

    def resume(self, writer: WriterProcess) -> None:
        writer.process.send_signal(signal.SIGCONT)
        writer.paused_until = None
        self.record("resume", writer)

    def kill(self, writer: WriterProcess) -> None:
        writer.process.send_signal(signal.SIGKILL)
        writer.process.wait()
        writer.killed = True
        inside, txn = self.inside(writer)
        self.record("kill", writer, inside=inside, txn=txn)
        self.retired.append(writer)
        self.spawn(writer.index, writer.incarnation + 1)

    def all_writers(self) -> list[WriterProcess]:
        return [*self.retired, *self.writers.values()]

    def exited_early(self) -> None:
        for writer in list(self.writers.values()):
            code = writer.process.poll()
            if code is not None and not self.stop_path.exists():
                self.drain(writer)
                self.violations.append(
                    violation(
                        f"WRITER EXITED: w{writer.index}.{writer.incarnation} exited {code} during the storm: "
                        f"{tail_of(writer.stderr)}"
                    )
                )
                del self.writers[writer.index]
                self.retired.append(writer)


def tail_of(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-STDERR_CHARS:].strip() or "(no stderr)"
    except FileNotFoundError:
        return "(no stderr)"


def chaos_step(
    storm: Storm, plan: ChaosPlan, done: dict[str, int], ttl_ms: int
) -> None:
    left = [
        kind for kind in ("pause", "kill") if done[kind] < getattr(plan, kind + "s")
    ]
    running = [w for w in storm.writers.values() if w.paused_until is None]
    paused = len(storm.writers) - len(running)
    if not left or not running:
        return
    kind = storm.rng.choice(left)
    if kind == "pause" and paused >= max(1, len(storm.writers) // 2):
        return
    if kind == "pause":
        # Aimed pauses go to even writers: they mark their write transactions.
        aimed = done["pause"] % plan.aim_every == 0
        marking = [w for w in running if w.index % 2 == 0]
        target = storm.rng.choice(marking if aimed and marking else running)
        storm.pause(target, ttl_ms, plan, aimed=aimed and bool(marking))
    else:
        target = storm.rng.choice(running)
        storm.kill(target)
    done[kind] += 1
