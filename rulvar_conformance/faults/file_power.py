"""Crash consistency of the file store's journal under simulated power loss (W5).

``run_file_power_loss`` boots a store root from a disk image, lets threads on
two handles append to their runs and replace their metas, cuts the power at a
random write, fsync, truncate or rename (``PowerLossFileOps``), lays out what
the disk holds and checks it on the next boot:

- every acknowledged append is there, in order, and at most the one in flight
  beside it (the file store syncs every append, so it promises what SQLite's
  FULL promises);
- a torn last line (a cut inside an append) is left out of ``load`` and
  repaired by the next append, never read as corruption;
- a run's folder and journal survive once an append was acknowledged (the
  store syncs the folder that gained them);
- ``meta.json`` is the last acknowledged meta or the one in flight, whole
  (written to a temp file, synced, renamed, folder synced).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final
from urllib.parse import quote

from rulvar_conformance.faults._file_power import PowerLossFileOps, write_image
from rulvar_conformance.faults._power_storm import (
    CutReport,
    PowerStorm,
    SeqBook,
    close_after_cut,
)
from rulvar_store import OpenedStore, open_store
from rulvar_store.backend import file_ops_layer

__all__ = ["FilePowerReport", "LayerFactory", "run_file_power_loss"]

THREADS: Final = 3
HANDLES: Final = 2
WRITES_PER_THREAD: Final = 4
# Each write is about 2 changes (write, fsync), a meta 3 and a new run 1 more.
CUT_WINDOW: Final = 50

LayerFactory = Callable[[random.Random], PowerLossFileOps]


@dataclass
class FilePowerReport(CutReport):
    lost: int = 0
    torn_lines: int = 0
    dropped_bytes: int = 0

    def summary(self) -> str:
        return (
            f"{self.cuts} power cuts under the file store: {self.acknowledged} "
            f"acknowledged appends and {self.metas_acknowledged} metas, {self.lost} "
            "lost; "
            f"{self.torn_lines} torn last lines left out and repaired, "
            f"{self.in_flight_landed} in-flight appends landed, {self.typed_errors} "
            f"calls failed typed at the cut, {self.dropped_bytes} unsynced bytes dropped"
        )


@dataclass
class _Book(SeqBook):
    meta_acked: int | None = None
    meta_in_flight: int | None = None


class _FileMachine(PowerStorm[FilePowerReport, _Book]):
    def __init__(self, workdir: Path, layer: PowerLossFileOps) -> None:
        books = {f"run-{i}": _Book() for i in range(THREADS)}
        super().__init__(workdir, FilePowerReport(), books, layer.is_dead)
        self.layer = layer

    def boot(self, number: int) -> Path:
        folder = self.workdir / f"boot-{number}"
        root = folder / "root"
        root.mkdir(parents=True)
        write_image(self.layer.image, root)
        self.retire_previous_boot(folder)
        self.layer.boot(root)
        return root

    def _open(self, root: Path) -> OpenedStore:
        return open_store("file://" + quote(str(root)))

    def verify(self, root: Path) -> bool:
        for run_id in self.books:
            journal = root / run_id / "journal.jsonl"
            if journal.exists():
                data = journal.read_bytes()
                if data and not data.endswith(b"\n"):
                    self.report.torn_lines += 1
        try:
            with self._open(root) as opened:
                for run_id, book in self.books.items():
                    self._verify_run(opened, run_id, book)
        except Exception as exc:
            self.report.violate(
                f"the rebooted store cannot be read: {type(exc).__name__}: {exc}"
            )
            return False
        return True

    def _verify_run(self, opened: OpenedStore, run_id: str, book: _Book) -> None:
        seqs = [entry.get("seq") for entry in opened.journal.load(run_id)]
        told = book.told()
        before = book.survivors
        new = seqs[len(before) :]
        if seqs[: len(before)] != before or new != told[: len(new)]:
            self.report.violate(
                f"{run_id}: journal {seqs}, had {before}, then told {book.acked} "
                f"(in flight {book.in_flight})"
            )
        elif len(new) < len(book.acked):
            self.report.lost += len(book.acked) - len(new)
            self.report.violate(
                f"{run_id}: acknowledged appends lost: told {book.acked}, found {new}"
            )
        elif len(new) > len(book.acked):
            self.report.in_flight_landed += 1
        meta = opened.journal.get_meta(run_id)  # type: ignore[attr-defined]
        step = None if meta is None else meta.get("step")
        allowed = {book.meta_acked, book.meta_in_flight} - {None}
        if book.meta_acked is None:
            allowed.add(None)
        if step not in allowed:
            self.report.violate(
                f"{run_id}: meta step {step}, told {book.meta_acked} "
                f"(in flight {book.meta_in_flight})"
            )
        book.survivors = seqs
        book.acked, book.in_flight = [], None
        book.meta_acked = step if isinstance(step, int) else None
        book.meta_in_flight = None

    def storm(self, root: Path, rng: random.Random) -> None:
        self.layer.arm(rng.randint(1, CUT_WINDOW), tear=rng.random() < 0.5)
        handles = [self._open(root) for _ in range(HANDLES)]
        self.run_writers(
            [
                partial(self._writer, handles[i % HANDLES], f"run-{i}")
                for i in range(THREADS)
            ]
        )
        self.layer.cut()
        close_after_cut(handles)

    def _writer(self, opened: OpenedStore, run_id: str) -> None:
        book = self.books[run_id]
        seq = len(book.survivors)
        with self.writer_calls(run_id):
            for number in range(WRITES_PER_THREAD):
                entry = {"seq": seq, "kind": "step"}
                if not self.appended(
                    book, seq, partial(opened.journal.append, run_id, entry)
                ):
                    return
                seq += 1
                if number % 2 == 1:
                    book.meta_in_flight = seq
                    opened.journal.put_meta(
                        {"runId": run_id, "status": "running", "step": seq}
                    )
                    if self.layer.is_dead():
                        return
                    book.meta_acked, book.meta_in_flight = seq, None
                    with self.lock:
                        self.report.metas_acknowledged += 1


def run_file_power_loss(
    workdir: Path,
    cuts: int,
    *,
    seed: int | None = None,
    layer: LayerFactory = PowerLossFileOps,
    time_cap_s: float = 150.0,
) -> FilePowerReport:
    """Cut the power under a file store ``cuts`` times (fewer past ``time_cap_s``)."""
    rng = random.Random(seed)
    ops = layer(rng)
    machine = _FileMachine(workdir, ops)
    started = time.monotonic()
    with file_ops_layer(ops):
        for number in range(cuts):
            if time.monotonic() - started > time_cap_s:
                break
            root = machine.boot(number)
            if not machine.verify(root):
                return machine.report
            if machine.report.violations:
                return machine.report  # one broken cut says it; more add nothing
            machine.storm(root, rng)
            machine.report.cuts += 1
            machine.report.dropped_bytes += ops.dropped_bytes
        machine.verify(machine.boot(cuts))
    return machine.report
