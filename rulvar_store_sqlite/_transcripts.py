"""The fenced blob twin of a ``SqliteStore``: same file, connection and lock (T6, T7)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, final

import apsw

from rulvar_store import BlobBatch, Lease
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    Observed,
    blob_batch,
    check_run_match,
    get_under_args,
    instrumented,
    last_ref_args,
    prefix_upper_bound,
)
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._group_commit import GroupCommitter, Queued
from rulvar_store_sqlite._store import sqlite_target
from rulvar_store_sqlite._transaction import Operation, one_statement

FenceFor = Callable[[Lease | None], Callable[[], None] | None]
"""The store's lease check for a write: ``None`` for an unleased one."""

__all__ = ["QUEUE_LINGER_S", "QueuedPut", "SqliteFencedTranscriptStore"]

# How long a queued put waits for a write to share its COMMIT. A LangGraph
# step's checkpoint follows its task's writes after a median 0.2 ms and a
# 90th percentile 0.9 ms (4-node graph, 2 shared cores): 2 ms catches nearly
# all, and a lone queued put is late by no more.
QUEUE_LINGER_S: Final = 0.002


@final
@dataclass(frozen=True, slots=True)
class QueuedPut:
    """A put queued by ``queue_put``: pass it to ``await_put``."""

    ref: str
    lease: Lease | None
    queued: Queued[None]


@final
# Nested: ``AsyncSqliteTranscriptStore`` runs these reads inside its own calls.
@instrumented(lambda twin: sqlite_target(twin._door.path), role="blobs", nested=True)
class SqliteFencedTranscriptStore(Observed):
    """Blobs in the store's ``blobs`` table; leased writes are fenced like appends.

    Obtain it from ``SqliteStore.transcripts()`` (one memoized twin per store).
    Blobs and lease rows share one transactional domain, so a leased ``put`` or
    ``delete`` checks the lease and changes the blob in one ``BEGIN IMMEDIATE``
    transaction: a stale write leaves the prior blob byte-intact. Works for
    ``:memory:`` too, where a separate connection would not even see the leases.
    """

    fenced_writes: Literal[True] = True

    def __init__(self, door: GroupCommitter, fence: FenceFor) -> None:
        self._door = door
        self._fence = fence

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        """Store ``blob`` under ``ref``, overwriting in place (T1).

        Raises:
            InvalidArgumentError: a bad ref, blob or lease (``_intake`` rules).
            LeaseHeldError: the lease names another run (F2) or is not live.
        """
        self._door.submit(self._put_op(ref, blob, lease))

    def _put_op(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> Operation[None]:
        """The operation of ``put``: checked arguments, fence, mutation."""
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        check_run_match(_intake.lease_or_none(lease, "blob put"), run_id, "blob put")
        # Copied now: a later mutation must not leak in (D3).
        data = _intake.blob_bytes(blob, "blob put")
        return Operation(
            "blob_put",
            self._fence(lease),
            one_statement(sql.UPSERT_BLOB, (ref, run_id, data)),
            atomic=True,
        )

    def queue_put(
        self,
        ref: str,
        blob: bytes | bytearray | memoryview,
        lease: Lease | None = None,
        linger_s: float = QUEUE_LINGER_S,
    ) -> QueuedPut:
        """Queue ``put`` to share the COMMIT of the next write of this store.

        For a write nobody waits on at once (a LangGraph task's writes, which
        the step's checkpoint follows within a millisecond): the first write
        submitted within ``linger_s`` carries it in its transaction, one WAL
        flush for both; with none it commits alone then. Queued writes keep
        their order against every later write of the store. Finish it with
        ``await_put``, which returns once it is durable, as ``put`` would.

        Raises:
            InvalidArgumentError: a bad ref, blob or lease (``_intake`` rules),
                here; ``await_put`` raises the write's own errors.
        """
        op = self._put_op(ref, blob, lease)
        return QueuedPut(ref, lease, self._door.queue(op, linger_s))

    def await_put(self, queued: QueuedPut) -> bool:
        """Wait for a ``queue_put`` write: return once durable, or raise as ``put``.

        Returns whether a write came within the linger to share its COMMIT: a
        caller whose writes wait in vain should go back to ``put``.

        Raises:
            LeaseHeldError: the lease names another run (F2) or is not live.
            StoreBusyError, StoreUnavailableError: as ``put``.
        """
        queued.queued.wait()
        return queued.queued.accompanied

    def flush_queued(self) -> None:
        """Commit now a queued put still lingering for company (before a read that must see it)."""
        self._door.flush()

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run in ONE fenced transaction (T11).

        One ``BEGIN IMMEDIATE``, one fence check, the upserts, one COMMIT: a
        lease that is not live refuses the whole batch, and other handles see
        all of it or none. An empty batch submits nothing.

        Raises:
            InvalidArgumentError: the batch breaks a ``_batch`` rule.
            LeaseHeldError: the lease names another run (F2) or is not live.
        """
        op = self._put_many_op(items, lease)
        if op is not None:
            self._door.submit(op)

    def _put_many_op(
        self, items: BlobBatch, lease: Lease | None = None
    ) -> Operation[None] | None:
        """The operation of ``put_many``, or ``None`` for an empty batch."""
        batch = blob_batch(items, lease)
        if not batch.items:
            return None
        rows = [(ref, batch.run_id, data) for ref, data in batch.items]

        def upsert(cursor: apsw.Cursor) -> None:
            cursor.executemany(sql.UPSERT_BLOB, rows)

        # Several statements: not atomic by itself, so the door gives it a
        # savepoint and a failed upsert undoes the ones before it.
        return Operation("blob_put_many", self._fence(batch.lease), upsert)

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` for a missing ref (T2)."""
        _intake.ref_for_read(ref, "blob get")
        rows = self._door.read("blob_get", sql.GET_BLOB, (ref,))
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)
        return data

    def list_refs(self, run_id: str) -> list[str]:
        """Return the sorted refs that start with ``run_id + "/"`` (T4)."""
        _intake.run_id_for_read(run_id, "blob list_refs")
        statement = (
            sql.LIST_BLOB_REFS_BY_PREFIX if "/" in run_id else sql.LIST_BLOB_REFS
        )
        return [
            str(row[0]) for row in self._door.read("blob_list", statement, (run_id,))
        ]

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12).

        One read: a backward scan of the ref key over ``[prefix, bound)``.

        Raises:
            InvalidArgumentError: a ``_last_ref`` rule is broken.
        """
        _, prefix = last_ref_args(run_id, prefix)
        bound = prefix_upper_bound(prefix)
        # The prefix holds a '/', which can always be raised: a bound exists.
        assert bound is not None
        rows = self._door.read("blob_last_ref", sql.LAST_BLOB_REF, (prefix, bound))
        return str(rows[0][0]) if rows else None

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13).

        One read: a range scan of the ref key over ``[prefix, bound)`` (BINARY
        collation: code point order).

        Raises:
            InvalidArgumentError: a ``_last_ref`` rule is broken.
        """
        _, prefix = get_under_args(run_id, prefix)
        bound = prefix_upper_bound(prefix)
        # The prefix holds a '/', which can always be raised: a bound exists.
        assert bound is not None
        rows = self._door.read("blob_get_under", sql.BLOBS_UNDER, (prefix, bound))
        found: list[tuple[str, bytes]] = []
        for ref, data in rows:
            assert isinstance(data, bytes)
            found.append((str(ref), data))
        return found

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; a missing ref is a no-op, also under a live lease (T2).

        Raises:
            LeaseHeldError: the lease names another run (F2) or is not live.
        """
        self._door.submit(self._delete_op(ref, lease))

    def _delete_op(self, ref: str, lease: Lease | None = None) -> Operation[None]:
        """The operation of ``delete``: checked arguments, fence, mutation."""
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        check_run_match(
            _intake.lease_or_none(lease, "blob delete"), run_id, "blob delete"
        )

        def remove(cursor: apsw.Cursor) -> None:
            cursor.execute(sql.DELETE_BLOB, (ref,))

        return Operation("blob_delete", self._fence(lease), remove, atomic=True)

    def close(self) -> None:
        """Nothing to do: the twin ends when its store closes (T7)."""
