"""Crash consistency of a SQLite store under simulated power loss (CONTRACT P1-P4).

``run_power_loss`` boots a store folder, lets several threads on two handles
write fenced journal entries (group commit shares a transaction between the
threads of one handle), cuts the power at a random change of the files
(``PowerLossVFS``), reboots from what the disk holds and checks it:

- ``PRAGMA integrity_check`` is ``ok`` (P1);
- at ``FULL`` every write acknowledged before the cut is there (P2);
- at ``NORMAL`` the survivors of each run are a prefix of the order its writes
  were acknowledged in, and nothing that survived an earlier cut is lost (P3);
- a new lease's epoch is above the epoch of every lease that wrote durably, and
  at ``FULL`` above every acknowledged lease (P4); at ``NORMAL`` a lost
  ``acquire`` whose lease wrote nothing durable may hand its epoch out again,
  which the report counts as ``repeated_epochs``.

Each reboot is the next cycle's start, so one run of ``cuts`` cycles is one
machine losing power ``cuts`` times. The opener is a parameter so a test can
hand in a store with a seeded defect and see the check catch it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

import apsw

from rulvar_conformance.faults._power_storm import (
    CutReport,
    PowerStorm,
    SeqBook,
    close_after_cut,
)
from rulvar_conformance.faults._power_vfs import PowerLossVFS
from rulvar_conformance.harness.site import ManualClock
from rulvar_store import Clock, Lease, OpenedStore, open_store
from rulvar_store.errors import RulvarError

__all__ = [
    "PowerLossReport",
    "SqliteOpener",
    "Synchronous",
    "open_sqlite_at",
    "run_power_loss",
]

Synchronous = Literal["FULL", "NORMAL"]
SqliteOpener = Callable[[str, Synchronous, Clock], OpenedStore]
"""Opens one handle on the database at ``path`` with the level and clock given."""

TTL_MS: Final = 60_000
THREADS: Final = 4
HANDLES: Final = 2
WRITES_PER_THREAD: Final = 5
# About the changes (writes, truncates, syncs) one cycle's storm makes: the cut
# lands uniformly among them, or after the storm (a cut at rest) past the end.
CUT_WINDOW: Final = 90
DB_NAME: Final = "store.db"


def open_sqlite_at(path: str, synchronous: Synchronous, now: Clock) -> OpenedStore:
    """The honest opener: the store the URL opens, at the level asked for."""
    return open_store(
        "sqlite:///" + quote(path), synchronous=synchronous, now=now, ttl_ms=TTL_MS
    )


@dataclass
class PowerLossReport(CutReport):
    """What the power cuts did and what the checks found."""

    synchronous: str = field(kw_only=True)  # after the shared figures' defaults
    torn_cuts: int = 0
    lost_acknowledged: int = 0
    dropped_writes: int = 0
    torn_writes: int = 0
    repeated_epochs: int = 0
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.cuts} power cuts at {self.synchronous} ({self.torn_cuts} tearing "
            f"the last unsynced writes): {self.acknowledged} acknowledged appends "
            f"and {self.metas_acknowledged} metas, {self.lost_acknowledged} appends "
            f"lost, {self.in_flight_landed} in-flight "
            f"writes landed, {self.typed_errors} calls failed typed at the cut, "
            f"{self.dropped_writes} unsynced page writes dropped, {self.torn_writes} "
            f"torn, {self.repeated_epochs} epochs handed out again"
        )


@dataclass
class _RunBook(SeqBook):
    """What one run's writer was told, and what survived so far."""

    durable_epoch: int = 0
    acked_epoch: int = 0
    # The fenced meta records how many entries the run had when it was written.
    meta_durable: object = None
    metas_acked: list[int] = field(default_factory=list)
    meta_in_flight: int | None = None


class _Machine(PowerStorm[PowerLossReport, _RunBook]):
    """One store folder losing power again and again."""

    def __init__(
        self,
        workdir: Path,
        synchronous: Synchronous,
        opener: SqliteOpener,
        rng: random.Random,
    ) -> None:
        vfs = PowerLossVFS(f"rulvar-power-{id(self)}", rng)
        books = {f"run-{i}": _RunBook() for i in range(THREADS)}
        super().__init__(
            workdir, PowerLossReport(synchronous=synchronous), books, vfs.is_dead
        )
        self.synchronous = synchronous
        self.opener = opener
        self.rng = rng
        self.clock = ManualClock()
        self.vfs = vfs
        self.image: dict[str, bytes] = {}

    def close(self) -> None:
        self.vfs.unregister()

    def boot(self, number: int) -> Path:
        """A fresh folder holding the disk's image; the clock moves past every ttl."""
        folder = self.workdir / f"boot-{number}"
        folder.mkdir()
        for name, data in self.image.items():
            (folder / name).write_bytes(data)
        self.retire_previous_boot(folder)
        self.vfs.boot(str(folder))
        self.clock.advance(10 * TTL_MS)
        return folder / DB_NAME

    def verify(self, path: Path) -> bool:
        """Check the rebooted disk against what the writers were told.

        Returns False when the disk cannot be read at all (the violation says
        why): no later cycle can start from it.
        """
        try:
            connection = apsw.Connection(str(path))
            try:
                verdict = connection.execute("PRAGMA integrity_check").fetchall()
            finally:
                connection.close()
            if verdict != [("ok",)]:
                self.report.violate(f"integrity_check after the cut: {verdict[:3]}")
                return False
            opened = self.opener(str(path), self.synchronous, self.clock)
            try:
                for run_id, book in self.books.items():
                    self._verify_run(run_id, book, opened.journal.load(run_id))
                    meta = opened.journal.get_meta(run_id)  # type: ignore[attr-defined]
                    self._verify_meta(run_id, book, meta)
            finally:
                opened.close()
        except Exception as exc:
            self.report.violate(
                f"the rebooted store cannot be read: {type(exc).__name__}: {exc}"
            )
            return False
        return True

    def _verify_meta(
        self, run_id: str, book: _RunBook, meta: dict[str, object] | None
    ) -> None:
        """The meta is one that was written, at FULL the last acknowledged, and
        never ahead of the journal it describes (one WAL, one order)."""
        step = None if meta is None else meta.get("step")
        allowed = {book.meta_durable, *book.metas_acked, book.meta_in_flight}
        if self.synchronous == "FULL" and book.metas_acked:
            allowed = {book.metas_acked[-1], book.meta_in_flight}
        if step not in allowed:
            self.report.violate(
                f"{run_id}: meta step {step}, told {book.metas_acked} (in flight "
                f"{book.meta_in_flight}, before {book.meta_durable})"
            )
        if isinstance(step, int) and step > len(book.survivors):
            self.report.violate(
                f"{run_id}: the meta written after entry {step - 1} survived, "
                f"the entry did not ({len(book.survivors)} entries)"
            )
        book.meta_durable = step
        book.metas_acked = []
        book.meta_in_flight = None

    def _verify_run(
        self, run_id: str, book: _RunBook, entries: list[dict[str, object]]
    ) -> None:
        seqs = [entry.get("seq") for entry in entries]
        before = book.survivors
        if seqs[: len(before)] != before:
            self.report.violate(
                f"{run_id} lost entries that had survived earlier cuts: had "
                f"{before}, now {seqs}"
            )
        new = seqs[len(before) :]
        told = book.told()
        if new != told[: len(new)]:
            self.report.violate(
                f"{run_id}: survivors {new} are not a prefix of the acknowledged "
                f"order {book.acked} (in flight: {book.in_flight})"
            )
        lost = max(0, len(book.acked) - len(new))
        self.report.lost_acknowledged += lost
        if lost and self.synchronous == "FULL":
            self.report.violate(
                f"{run_id}: {lost} acknowledged writes lost at FULL: told "
                f"{book.acked}, found {new}"
            )
        if len(new) > len(book.acked):
            self.report.in_flight_landed += 1
        epochs = [
            e for e in (entry.get("epoch") for entry in entries) if isinstance(e, int)
        ]
        book.survivors = seqs
        book.durable_epoch = max([book.durable_epoch, *epochs])
        book.acked = []
        book.in_flight = None

    def storm(self, path: Path, cycle: int) -> None:
        """Writers on two handles until the power goes (or their quota is done)."""
        self.vfs.arm(
            self.rng.randint(1, CUT_WINDOW),
            tear=self.rng.random() < 0.5,
            on_cut=lambda: None,
        )
        handles: list[OpenedStore] = []
        try:
            for _ in range(HANDLES):
                handles.append(self.opener(str(path), self.synchronous, self.clock))
        except RulvarError:
            self.report.typed_errors += 1
        except Exception as exc:
            self.report.violate(f"opening failed untyped: {type(exc).__name__}: {exc}")
        if len(handles) == HANDLES:
            self.run_writers(
                [
                    partial(
                        self._writer,
                        handles[i % HANDLES],
                        f"run-{i}",
                        f"w{i}-boot{cycle}",
                    )
                    for i in range(THREADS)
                ]
            )
        self.vfs.cut()
        close_after_cut(handles)

    def _writer(self, opened: OpenedStore, run_id: str, owner: str) -> None:
        book = self.books[run_id]
        store = opened.journal
        with self.writer_calls(run_id):
            lease: Lease = store.acquire(run_id, owner)  # type: ignore[attr-defined]
            if self.vfs.is_dead():
                return
            self._check_epoch(run_id, book, lease.epoch)
            seq = len(book.survivors)
            for _ in range(WRITES_PER_THREAD):
                entry = {"seq": seq, "kind": "step", "epoch": lease.epoch}
                if not self.appended(
                    book, seq, partial(store.append, run_id, entry, lease)
                ):
                    return  # the answer came after the cut: the outcome is unknown
                seq += 1
                if seq % 2 == 0:
                    self._put_meta(store, run_id, book, seq, lease)

    def _put_meta(
        self, store: object, run_id: str, book: _RunBook, step: int, lease: Lease
    ) -> None:
        """A fenced meta write; acknowledged only if answered before the cut."""
        book.meta_in_flight = step
        meta = {"runId": run_id, "status": "running", "step": step}
        store.put_meta(meta, lease)  # type: ignore[attr-defined]
        if not self.vfs.is_dead():
            book.metas_acked.append(step)
            book.meta_in_flight = None
            with self.lock:
                self.report.metas_acknowledged += 1

    def _check_epoch(self, run_id: str, book: _RunBook, epoch: int) -> None:
        with self.lock:
            if epoch <= book.durable_epoch:
                self.report.violate(
                    f"{run_id}: acquire handed out epoch {epoch}, not above {book.durable_epoch} "
                    "of a lease that wrote durably"
                )
            if epoch <= book.acked_epoch:
                if self.synchronous == "FULL":
                    self.report.violate(
                        f"{run_id}: acquire handed out epoch {epoch} again at FULL "
                        f"(acknowledged before: {book.acked_epoch})"
                    )
                self.report.repeated_epochs += 1
            book.acked_epoch = max(book.acked_epoch, epoch)

    def cycle(self, number: int) -> bool:
        """Boot, check, write, cut; False when the booted disk was unreadable."""
        path = self.boot(number)
        if not self.verify(path):
            return False
        self.storm(path, number)
        figures = self.vfs.figures
        self.report.cuts += 1
        self.report.torn_cuts += int(figures.landed_writes + figures.torn_writes > 0)
        self.report.dropped_writes += figures.dropped_writes
        self.report.torn_writes += figures.torn_writes
        self.image = self.vfs.image()
        return True


def run_power_loss(
    workdir: Path,
    synchronous: Synchronous,
    cuts: int,
    *,
    seed: int | None = None,
    opener: SqliteOpener = open_sqlite_at,
    time_cap_s: float = 300.0,
) -> PowerLossReport:
    """Cut the power ``cuts`` times (fewer if ``time_cap_s`` runs out; the report says)."""
    rng = random.Random(seed)
    machine = _Machine(workdir, synchronous, opener, rng)
    started = time.monotonic()
    try:
        for number in range(cuts):
            if time.monotonic() - started > time_cap_s:
                break
            if not machine.cycle(number) or machine.report.violations:
                return machine.report  # one broken cut says it; more add nothing
        machine.verify(machine.boot(cuts))
    finally:
        machine.close()
    return machine.report
