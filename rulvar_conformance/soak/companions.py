"""Companion threads: each soak writer process carries more runs through its one handle.

A worker that hosts many runs writes through ONE store from many threads, and a
store may serve such callers together (``SqliteStore``'s group commit runs them
in one transaction). With ``companions=N`` each writer process starts N threads
beside the soak writer, each appending seq-guarded entries, unleased, to a run
of its own through the writer's handle, so the writer's fenced calls (its stale
probes included) share transactions with them under the soak's pauses and
kills: a store that fences only part of a batch lets a stale probe ride in.

Each companion writes ``invoke <seq>`` before and ``ok <seq>`` after every
append to a log of its own (one unbuffered ``write`` per line, as the writer's
records). After the storm ``verify_companions`` holds every companion run to its
log: seqs contiguous from 0, every acknowledged append stored, nothing stored
that was never invoked, and no more than the one append in flight when the
process died stored without its ``ok``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.soak.config import SoakWriterConfig
from rulvar_conformance.soak.snapshot import FinalState
from rulvar_conformance.soak.violations import Violation, violation
from rulvar_store import JournalOrderViolation, StoreBusyError, StoreUnavailableError

__all__ = [
    "CompanionCheck",
    "companion_log_of",
    "companion_run",
    "companion_runs_in",
    "start_companions",
    "stop_companions",
    "verify_companions",
]

PAUSE_S: Final = 0.001
"""Between a companion's appends: company for the writer, not a flood of its own."""
UNAVAILABLE_PAUSE_S: Final = 0.02
"""After an unknown outcome: a server outage is not hammered at 1000 tries a second."""
JOIN_S: Final = 10.0
LOG_SUFFIX: Final = ".companion-"


def companion_run(writer: int, incarnation: int, number: int) -> str:
    """The run companion ``number`` of one writer incarnation appends to (its own)."""
    return f"soak-companion-w{writer}.{incarnation}-{number}"


def companion_log_of(config: SoakWriterConfig, number: int) -> str:
    return f"{config.report_path}{LOG_SUFFIX}{number}"


class _Companion:
    """One thread's appends and their log lines."""

    def __init__(
        self, journal: Any, config: SoakWriterConfig, number: int, stop: threading.Event
    ) -> None:
        self.journal = journal
        self.run_id = companion_run(config.writer, config.incarnation, number)
        self.stop = stop
        self.fd = os.open(
            companion_log_of(config, number), os.O_WRONLY | os.O_APPEND | os.O_CREAT
        )
        self.log(f"run {self.run_id}")

    def log(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def run(self) -> None:
        seq, unsure = 0, False
        try:
            while not self.stop.is_set():
                self.log(f"invoke {seq}")
                entry = {"seq": seq, "kind": "companion", "run": self.run_id}
                try:
                    self.journal.append(self.run_id, entry)
                except StoreBusyError:
                    self.log(f"busy {seq}")  # nothing was written: the same seq again
                    time.sleep(PAUSE_S)
                    continue
                except StoreUnavailableError:
                    self.log(f"unknown {seq}")  # may have landed: try it again
                    unsure = True
                    time.sleep(UNAVAILABLE_PAUSE_S)
                    continue
                except JournalOrderViolation:
                    if not unsure:
                        raise
                    self.log(f"landed {seq}")  # the unknown attempt had committed
                else:
                    self.log(f"ok {seq}")
                seq, unsure = seq + 1, False
                time.sleep(PAUSE_S)
            self.log("stopped")  # a clean end: nothing was left in flight
        except Exception as exc:
            self.log(f"error {seq} {exc!r}"[:500])
        finally:
            os.close(self.fd)


def start_companions(
    journal: Any, config: SoakWriterConfig
) -> tuple[threading.Event, list[threading.Thread]]:
    """Start ``config.companions`` threads appending through ``journal``."""
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_Companion(journal, config, number, stop).run,
            name=f"companion-{number}",
            daemon=True,
        )
        for number in range(config.companions)
    ]
    for thread in threads:
        thread.start()
    return stop, threads


def stop_companions(stop: threading.Event, threads: list[threading.Thread]) -> None:
    stop.set()
    for thread in threads:
        thread.join(JOIN_S)


@dataclass
class CompanionCheck:
    """What ``verify_companions`` found: violations and acknowledged appends."""

    violations: list[Violation] = field(default_factory=list)
    appends: int = 0
    runs: int = 0


def _read(path: Path) -> tuple[str, list[tuple[str, int, str]]]:
    """The run a companion log names and its records; a torn last line is dropped."""
    data = path.read_bytes()
    lines = data[: data.rfind(b"\n") + 1].decode(errors="replace").splitlines()
    run_id = lines[0].split(" ", 1)[1] if lines else ""
    records = []
    for line in lines[1:]:
        kind, _, rest = line.partition(" ")
        number, _, detail = rest.partition(" ")
        records.append((kind, int(number) if number else -1, detail))
    return run_id, records


def _logs(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{LOG_SUFFIX}*"))


def companion_runs_in(logs: Path) -> list[str]:
    """The runs the companion logs under ``logs`` name: what the snapshot must read."""
    return [run_id for run_id, _ in map(_read, _logs(logs)) if run_id]


def verify_companions(state: FinalState, logs: Path) -> CompanionCheck:
    """Hold every companion run under ``logs`` to its log (see the module docstring).

    ``state`` must hold every run ``companion_runs_in(logs)`` names.
    """
    check = CompanionCheck()
    for path in _logs(logs):
        run_id, records = _read(path)
        if not run_id:
            continue  # killed before its first line: it appended nothing
        check.runs += 1
        invoked = {seq for kind, seq, _ in records if kind == "invoke"}
        acked = {seq for kind, seq, _ in records if kind in ("ok", "landed")}
        unsure = {seq for kind, seq, _ in records if kind == "unknown"}
        errors = [
            f"{seq}: {detail}" for kind, seq, detail in records if kind == "error"
        ]
        check.appends += len(acked)
        stored = [entry.get("seq", -1) for entry in state.run(run_id).entries]
        where = f"companion run {run_id!r} ({path.name})"
        if errors:
            check.violations.append(
                violation(f"COMPANION ERROR: {where} failed at seq {errors[0]}")
            )
        if stored != list(range(len(stored))):
            check.violations.append(
                violation(
                    f"COMPANION ORDER: {where} holds seqs {stored[:12]}, not 0..n in order"
                )
            )
        lost = sorted(acked - set(stored))
        if lost:
            check.violations.append(
                violation(
                    f"COMPANION LOST ACK: {where} lacks acknowledged appends {lost[:12]}"
                )
            )
        phantom = sorted(set(stored) - invoked)
        if phantom:
            check.violations.append(
                violation(
                    f"COMPANION PHANTOM: {where} holds seqs never invoked {phantom[:12]}"
                )
            )
        # Only a process that died can leave its last append stored without ok.
        stopped = any(kind == "stopped" for kind, _, _ in records)
        in_flight = set() if stopped else {max(invoked, default=-1)}
        unacked = sorted(set(stored) - acked - unsure - in_flight)
        if unacked:
            check.violations.append(
                violation(
                    f"COMPANION UNACKED: {where} holds seqs {unacked[:12]} that were never "
                    "acknowledged and were not in flight when its process died"
                )
            )
    return check
