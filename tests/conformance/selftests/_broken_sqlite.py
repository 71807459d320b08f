"""Realistic broken SQLite stores: the real ``SqliteStore`` with ONE plausible bug each.

Each class overrides the smallest piece a store author could plausibly get
wrong; ``sqlite_locations(cls, directory)`` makes a ``LocationFactory`` of fresh
database files opened through that class, with the same abilities the real
backend declares (shared, clock, processes, contention).
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import apsw

from rulvar_store import (
    Clock,
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    OpenedStore,
    StoreBusyError,
)
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    dump_record,
    finite_seq,
)
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._group_commit import GroupCommitter
from rulvar_store_sqlite._transaction import Operation

T = TypeVar("T")


class _FenceBeforeBeginDoor(GroupCommitter):
    def submit(self, op: Operation[T]) -> T:
        with self.lock:
            if op.fence is not None:
                op.fence()
                op.fence = None
            return super().submit(op)


class FenceBeforeBegin(SqliteStore):
    """Checks the lease with a plain SELECT, then opens the write transaction.

    Every failpoint still sits inside the transaction, so only a takeover that
    commits between the check and BEGIN shows the bug.
    """

    _door_type = _FenceBeforeBeginDoor
    # The defect moves the fence step, so appends must keep it as a step.
    _fence_in_insert_ok = False


class _FenceOwnTransactionDoor(GroupCommitter):
    def submit(self, op: Operation[T]) -> T:
        with self.lock:
            if op.fence is not None:
                super().submit(Operation(op.name, op.fence, _nothing))
                op.fence = None
            return super().submit(op)


def _nothing(cursor: apsw.Cursor) -> None:
    return None


class FenceOwnTransaction(SqliteStore):
    """Checks the lease in a transaction of its own, then writes in a second one."""

    _door_type = _FenceOwnTransactionDoor
    # The defect moves the fence step, so appends must keep it as a step.
    _fence_in_insert_ok = False


class UnpinnedRelease(SqliteStore):
    """release deletes the run's lease row with no fence and no owner/epoch in WHERE."""

    def release(self, lease: Lease) -> None:
        self._door.write(
            "release",
            None,
            lambda cursor: cursor.execute(
                "DELETE FROM leases WHERE run_id = ?", (lease.run_id,)
            ),
        )


class UnpinnedLeaseRow(SqliteStore):
    """renew/release touch any live lease row of the run: no owner or epoch pinned."""

    def renew(self, lease: Lease) -> None:
        def extend(cursor: apsw.Cursor) -> None:
            now = self._now()
            cursor.execute(
                "UPDATE leases SET expires_at = ? WHERE run_id = ? AND expires_at > ?",
                (now + self.lease_ttl_ms, lease.run_id, now),
            )
            if self._conn.changes() == 0:
                raise LeaseHeldError(
                    "renew: not live", lease.run_id, lease.owner, lease.epoch
                )

        self._door.write("renew", None, extend)

    def release(self, lease: Lease) -> None:
        def drop(cursor: apsw.Cursor) -> None:
            cursor.execute(
                "DELETE FROM leases WHERE run_id = ? AND expires_at > ?",
                (lease.run_id, self._now()),
            )
            if self._conn.changes() == 0:
                raise LeaseHeldError(
                    "release: not live", lease.run_id, lease.owner, lease.epoch
                )

        self._door.write("release", None, drop)


class EpochReadBeforeBegin(SqliteStore):
    """acquire reads the epoch counter before its transaction and writes counter + 1."""

    def _next_epoch(self, run_id: str) -> int:
        rows = self._door.read(
            "acquire", "SELECT epoch FROM epochs WHERE run_id = ?", (run_id,)
        )
        return int(rows[0][0] if rows else 0) + 1  # type: ignore[arg-type]  # INTEGER

    def acquire(self, run_id: str, owner: str) -> Lease:
        epoch = self._next_epoch(run_id)
        now = self._now()

        def check_free() -> None:
            row = self._cursor.execute(sql.LEASE_ROW, (run_id,)).fetchall()
            if row and row[0][2] > now:  # type: ignore[operator]  # INTEGER column
                raise LeaseHeldError("held", run_id, None, None)

        def take(cursor: apsw.Cursor) -> Lease:
            cursor.execute(
                "INSERT INTO epochs (run_id, epoch) VALUES (?1, ?2) "
                "ON CONFLICT (run_id) DO UPDATE SET epoch = ?2",
                (run_id, epoch),
            )
            cursor.execute(
                sql.TAKE_LEASE, (run_id, owner, epoch, now + self.lease_ttl_ms, now)
            )
            return Lease(run_id, owner, epoch)

        return self._door.write("acquire", check_free, take)


class SeqGuardBeforeBegin(SqliteStore):
    """append compares the seq with a tail read before its transaction, then inserts."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        seq = finite_seq(entry)
        if seq is not None:
            rows = self._door.read(
                "append",
                "SELECT max(json_extract(payload, '$.seq')) FROM entries WHERE run_id = ?",
                (run_id,),
            )
            tail = rows[0][0]
            if tail is not None and tail >= seq:  # type: ignore[operator]  # numeric
                raise JournalOrderViolation("seq not above tail", run_id, seq)
        text = dump_record(entry)
        self._door.write(
            "append",
            self._fence(lease),
            lambda cursor: cursor.execute(sql.INSERT_ENTRY, (run_id, text)),
        )


def _take_lease(run_id: str, owner: str, expires_at: int, cursor: apsw.Cursor) -> Lease:
    """Bump the epoch and write the lease row, whoever holds it: the broken acquires
    decided the run was free outside this transaction."""
    epoch = cursor.execute(sql.BUMP_EPOCH, (run_id,)).fetchall()[0][0]
    assert isinstance(epoch, int)
    cursor.execute(
        "INSERT INTO leases (run_id, owner, epoch, expires_at) "
        "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id) DO UPDATE SET "
        "owner = excluded.owner, epoch = excluded.epoch, "
        "expires_at = excluded.expires_at",
        (run_id, owner, epoch, expires_at),
    )
    return Lease(run_id, owner, epoch)


class AcquireCheckBeforeBegin(SqliteStore):
    """acquire finds the run free with a plain SELECT, then upserts the lease row."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        now = self._now()
        rows = self._door.read("acquire", sql.LEASE_ROW, (run_id,))
        if rows and rows[0][2] > now:  # type: ignore[operator]  # INTEGER column
            raise LeaseHeldError("held", run_id, None, None)
        take = partial(_take_lease, run_id, owner, now + self.lease_ttl_ms)
        return self._door.write("acquire", lambda: None, take)


class _DeferredBeginDoor(GroupCommitter):
    begin = "BEGIN"  # the bug: no write lock until the first write


class DeferredBegin(SqliteStore):
    """Opens write transactions with a plain (deferred) BEGIN, not BEGIN IMMEDIATE.

    The rest is the honest write path (the store's own door): fence, mutation
    and commit in that transaction, failpoints at their places.
    """

    _door_type = _DeferredBeginDoor


class ProcessLocalLeases(SqliteStore):
    """Decides whether a run is free from a lease table kept in this process.

    Every handle in one interpreter shares the table, so in-process checks pass;
    a lease taken by another process is invisible to it.
    """

    _expiry: ClassVar[dict[tuple[str, str], int]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def acquire(self, run_id: str, owner: str) -> Lease:
        key = (self.path, run_id)
        with self._guard:
            now = self._now()
            if self._expiry.get(key, 0) > now:
                raise LeaseHeldError("held", run_id, None, None)
            take = partial(_take_lease, run_id, owner, now + self.lease_ttl_ms)
            lease = self._door.write("acquire", lambda: None, take)
            self._expiry[key] = now + self.lease_ttl_ms
            return lease

    def renew(self, lease: Lease) -> None:
        super().renew(lease)
        with self._guard:
            self._expiry[(self.path, lease.run_id)] = self._now() + self.lease_ttl_ms

    def release(self, lease: Lease) -> None:
        super().release(lease)
        with self._guard:
            self._expiry.pop((self.path, lease.run_id), None)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        super().delete(run_id, lease)
        with self._guard:
            self._expiry.pop((self.path, run_id), None)


class _RawBusyErrorDoor(GroupCommitter):
    def submit(self, op: Operation[T]) -> T:
        try:
            return super().submit(op)
        except StoreBusyError as exc:
            cause = exc.__cause__
            raise cause if isinstance(cause, apsw.Error) else exc from None


class RawBusyError(SqliteStore):
    """Lets the driver's busy error escape instead of the typed StoreBusyError."""

    _door_type = _RawBusyErrorDoor


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


class NoInstanceLock(SqliteStore):
    """Shares its one connection between threads without the instance lock (Q9).

    Group commit is off: its queue would serialize the writers on its own.
    """

    def __init__(self, path: str, **options: object) -> None:
        super().__init__(path, group_commit=False, **options)  # type: ignore[arg-type]  # pass-through
        self._lock = _NoLock()  # type: ignore[assignment]  # the bug under test
        self._door.lock = self._lock  # the bug under test


def _unfenced_after_first(batch: list[Operation[Any]]) -> None:
    for op in batch[1:]:
        op.fence = None


class _FenceFirstOfBatchDoor(GroupCommitter):
    def run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        def more_unfenced() -> bool:
            grew = more()
            _unfenced_after_first(batch)
            return grew

        _unfenced_after_first(batch)
        super().run_batch(batch, more_unfenced)


class FenceFirstOfBatch(SqliteStore):
    """Group commit that checks the lease of each batch's first operation only.

    The callers queued behind it and the late joiners ride on that one check,
    so a write with a dead lease commits whenever it shares a transaction with
    a live one. A caller alone (every other suite) is fenced as it should be.
    """

    _door_type = _FenceFirstOfBatchDoor


class _Refusal(BaseException):
    """Carries one operation's refusal out of the shared transaction."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _as_refusal(call: Callable[..., T]) -> Callable[..., T]:
    def raising(*args: Any) -> T:
        try:
            return call(*args)
        except Exception as exc:
            raise _Refusal(exc) from exc

    return raising


class _RefusalFailsBatchDoor(GroupCommitter):
    def run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        wrapped: set[int] = set()

        def wrap_new() -> None:
            for op in batch:
                if id(op) not in wrapped:
                    wrapped.add(id(op))
                    op.fence = None if op.fence is None else _as_refusal(op.fence)
                    op.mutate = _as_refusal(op.mutate)

        def more_wrapped() -> bool:
            grew = more()
            wrap_new()
            return grew

        wrap_new()
        try:
            super().run_batch(batch, more_wrapped)
        except _Refusal as refusal:  # the transaction was rolled back
            for op in batch:
                if not op.done:
                    op.fail(copy.copy(refusal.error))


class RefusalFailsBatch(SqliteStore):
    """Group commit where one refused operation rolls back and fails its whole batch.

    Nothing wrong is stored, but every batch-mate of a refused write (a live
    lease, a fine seq) is told ``LeaseHeldError`` or ``JournalOrderViolation``
    for someone else's mistake, and its write is lost.
    """

    _door_type = _RefusalFailsBatchDoor


def sqlite_locations(cls: type[SqliteStore], directory: Path) -> LocationFactory:
    """Fresh database files in ``directory``, every handle opened through ``cls``."""
    numbers = count()

    def fresh() -> StoreLocation:
        path = str(directory / f"{cls.__name__}-{next(numbers)}.db")

        def opener(
            ttl_ms: int | None, now: Clock | None, fail_fast: bool
        ) -> OpenedStore:
            store = cls(
                path,
                ttl_ms=ttl_ms or 60_000,
                now=now,
                busy_timeout_ms=100 if fail_fast else 5_000,
            )
            return OpenedStore(store, store.transcripts(), (store.close,))

        def cleanup() -> None:
            for suffix in ("", "-wal", "-shm"):
                with suppress(FileNotFoundError):
                    os.remove(path + suffix)

        return StoreLocation(name=path, opener=opener, contention=True, cleanup=cleanup)

    return fresh


class _KeepsLeadershipDoor(GroupCommitter):
    """A door whose leader runs its batch and never hands leadership on."""

    def _lead(self, own: Operation[Any] | None) -> None:
        batch: list[Operation[Any]] = []
        with self.lock:
            with self._mutex:
                batch, self._queue = self._queue, []
                self._heir = None
            self._decide(batch, lambda: self._take_more(batch))
        # The bug: ``_leading`` stays set and nobody queued behind is woken, so
        # every later caller queues for a leader that will never come.
        for op in batch:
            if op is not own:
                op.wake()


class NeverHandsOn(SqliteStore):
    """Group commit whose first leader keeps leadership: the second write hangs forever."""

    _door_type = _KeepsLeadershipDoor
