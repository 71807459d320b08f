"""Broken SQLite stores whose bug is in durability or in state kept past its read.

Each is the real ``SqliteStore`` with one plausible bug; open them through
``_broken_sqlite.sqlite_locations``. Every other suite passes them (a caller
alone, or a batch that never puts a change before a write of the same run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from rulvar_store import Lease, LeaseHeldError
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._group_commit import GroupCommitter
from rulvar_store_sqlite._transaction import Operation

__all__ = ["AcksBeforeCommit", "LeaseRowOncePerBatch", "SyncOffBehindTheDeclaration"]


class _AcksBeforeCommitDoor(GroupCommitter):
    """Tells each queued caller its outcome as soon as its operation is applied."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._early: set[int] = set()
        self._leaders: set[int] = set()  # a leader's own operation, answered as usual

    def run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        wrapped: set[int] = set()

        def wrap_new() -> None:
            for op in batch:
                if id(op) not in wrapped and op.resume is None:
                    wrapped.add(id(op))
                    op.mutate = self._acknowledging(op, op.mutate)

        def more_wrapped() -> bool:
            grew = more()
            wrap_new()
            return grew

        wrap_new()
        super().run_batch(batch, more_wrapped)

    def _acknowledging(
        self, op: Operation[Any], mutate: Callable[[apsw.Cursor], Any]
    ) -> Callable[[apsw.Cursor], Any]:
        def applied(cursor: apsw.Cursor) -> Any:
            result = mutate(cursor)
            # The bug: "it is applied, the COMMIT is a formality" - the caller is
            # answered (and may tell the world) before COMMIT has even started.
            if id(op) not in self._leaders:
                op.succeed(result)
                self._early.add(id(op))
                op.wake()
            return result

        return applied

    def _hand_over(
        self, batch: list[Operation[Any]], own: Operation[Any] | None
    ) -> None:
        answered = [op for op in batch if id(op) in self._early]
        for op in answered:
            self._early.discard(id(op))
        super()._hand_over([op for op in batch if op not in answered], own)

    def _lead(self, own: Operation[Any] | None) -> None:
        if own is not None:
            self._leaders.add(id(own))
        try:
            super()._lead(own)
        finally:
            if own is not None:
                self._leaders.discard(id(own))


class AcksBeforeCommit(SqliteStore):
    """Group commit that answers its queued callers before the batch's COMMIT ran.

    Visibility looks right in-process (the leader commits a moment later); a
    process killed in that moment has told its callers of writes that are gone.
    """

    _door_type = _AcksBeforeCommitDoor


class _LeaseRowsPerBatchDoor(GroupCommitter):
    """Starts each batch with an empty copy of the lease rows it reads."""

    lease_rows: dict[str, tuple[Any, ...] | None]

    def run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        self.lease_rows = {}
        super().run_batch(batch, more)


class LeaseRowOncePerBatch(SqliteStore):
    """Group commit that reads a run's lease row once per batch and reuses it.

    A batch-mate's release, delete or takeover changes the row after the read,
    so later operations of the same batch are fenced against the old row. A
    caller alone, and every batch of different runs, is fenced correctly.
    """

    _door_type = _LeaseRowsPerBatchDoor

    def _lease_row(self, run_id: str) -> tuple[Any, ...] | None:
        rows = self._door.lease_rows  # type: ignore[attr-defined]  # the door above
        if run_id not in rows:
            found = self._cursor.execute(sql.LEASE_ROW, (run_id,)).fetchall()
            rows[run_id] = tuple(found[0]) if found else None
        row: tuple[Any, ...] | None = rows[run_id]
        return row

    def _assert_fencing(self, lease: Lease) -> None:
        row = self._lease_row(lease.run_id)
        if (
            row is None
            or row[0] != lease.owner
            or row[1] != lease.epoch
            or row[2] <= self._now()
        ):
            raise LeaseHeldError(
                "not the live lease", lease.run_id, lease.owner, lease.epoch
            )

    def _acquire_op(self, run_id: str, owner: str) -> Operation[Lease]:
        op = super()._acquire_op(run_id, owner)
        check_free = op.fence
        assert check_free is not None

        def reading_once() -> None:
            self._lease_row(run_id)  # the batch's copy, read before the takeover
            check_free()

        op.fence = reading_once
        return op


class SyncOffBehindTheDeclaration(SqliteStore):
    """Declares ``synchronous=FULL`` but tunes its connection to OFF "for speed"."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self._door.cursor.execute("PRAGMA synchronous=OFF")
