"""``AsyncSqliteStore``: the SQLite store for asyncio callers, sharing group commit.

The async twin of ``SqliteStore`` beside it, not a second implementation: each
write is the sync store's own operation (``SqliteStore._append_op`` and the
rest: argument checks, fence, mutation with its seq guard), handed to the
store's one door (``GroupCommitter``). Coroutines writing through one store
therefore share group commit: their operations queue together, ONE worker
thread leads each batch as one ``BEGIN IMMEDIATE ... COMMIT``, every operation
keeps its own fence check, seq guard and outcome, and every caller's future is
resolved (one hop per event loop and batch) only after the shared COMMIT has
returned, durable at the store's ``synchronous`` level. Reads run whole on the
same worker thread. No SQLite call ever runs on the event-loop thread.

Cancellation is safe by construction: nothing of a transaction belongs to the
awaiting task. A caller cancelled while its write is still queued takes it out
of the queue (it never runs); one cancelled while a batch carries its write
waits for that batch to end (bounded by ``busy_timeout_ms``), so the write has
landed whole or not at all, no transaction is open and no file lock is held.
Either way the caller gets ``CancelledError`` and, as after a dropped
connection, does not know whether the write landed: the seq guard and the
fence make the retry safe (a repeated append of a landed seq is refused with
``JournalOrderViolation``; a superseded lease refuses everything).

A store used in a forked child refuses every call with ``ForkedStoreError``
before touching the parent's connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, TypeVar, final

from rulvar_store import (
    BlobBatch,
    BlobInput,
    JournalEntry,
    JournalTail,
    Lease,
    RunFilter,
    RunMeta,
)
from rulvar_store.backend import (
    AsyncClosing,
    Observed,
    armed,
    brief_put_args,
    finish_uncancelled,
    instrumented,
    wait_out,
)
from rulvar_store.errors import StoreClosedError
from rulvar_store_sqlite._brief import BriefWork
from rulvar_store_sqlite._group_commit import GroupCommitter
from rulvar_store_sqlite._store import SqliteStore, sqlite_target
from rulvar_store_sqlite._transaction import Operation
from rulvar_store_sqlite._transcripts import QUEUE_LINGER_S, SqliteFencedTranscriptStore

__all__ = ["AsyncQueuedPut", "AsyncSqliteStore", "AsyncSqliteTranscriptStore"]

T = TypeVar("T")


async def _write(door: GroupCommitter, op: Operation[T]) -> T:
    """Queue ``op`` for the next batch and return its outcome once it is durable.

    The future is awaited bare, not shielded: a cancel may cancel it, and the
    handler then waits for the batch on a fresh one (``_wait_for_batch``), so
    the common, uncancelled call pays for one future and one loop hop only.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    op.resume = (loop, future)
    door.enqueue(op)
    try:
        await future
    except asyncio.CancelledError:
        if not door.withdraw_queued(op):
            await _wait_for_batch(op, loop)  # a batch carries it: it ends whole first
        raise
    result = op.outcome()
    if armed():
        # The caller's own after-commit failpoint, in its context but never on
        # the loop (a hook may pause or kill) nor on the door's worker thread
        # (a paused caller must not hold up the store's other writers).
        await finish_uncancelled(
            loop.run_in_executor(None, op.context.run, door.after_commit, op)
        )
    return result


def _unchanged(cursor: object) -> None:
    """The mutation of a write that only orders itself after the queued ones."""


async def _wait_for_batch(op: Operation[Any], loop: asyncio.AbstractEventLoop) -> None:
    """Wait, whatever cancels meanwhile, until the batch carrying ``op`` is over.

    The door resumes ``op`` on this loop (``_group_commit._resolve``) by
    setting ``loop_woken`` and the future ``op.resume`` names at that moment;
    this runs on the same loop, so if the batch is not over yet, the fresh
    future put there now is the one it will set.
    """
    if op.loop_woken:
        return
    fresh: asyncio.Future[None] = loop.create_future()
    op.resume = (loop, fresh)
    await wait_out(fresh)


async def _call(door: GroupCommitter, operation: str, call: Callable[[], T]) -> T:
    """Run ``call`` whole on the door's worker thread, in the caller's context."""
    door.ensure_open(operation)
    return await finish_uncancelled(
        door.hop(asyncio.get_running_loop(), operation, call)
    )


@final
@instrumented(lambda store: sqlite_target(store.path), role="journal")
class AsyncSqliteStore(AsyncClosing, Observed):
    """Leasable, fenced, meta-lookup journal store in one SQLite file, for asyncio.

    Takes ``SqliteStore``'s arguments (``ttl_ms``, ``busy_timeout_ms``,
    ``synchronous``, ``now``, ``readonly``; ``group_commit`` applies to its
    sync callers only: coroutines always share commits). Opening reads the
    file, so open it with ``await AsyncSqliteStore.open(path, ...)`` inside a
    running loop, or construct it before the loop starts.
    """

    async_api: Final = True
    fenced_writes: Literal[True] = True
    shares_across_loops: Final = True
    """One handle may serve the coroutines of several event loops; a batch wakes
    each caller on its own loop (Y8)."""

    def __init__(self, path: str, **options: Any) -> None:
        self.sync_store: Final = SqliteStore(path, **options)
        self._door: Final = self.sync_store._door
        self._twin: AsyncSqliteTranscriptStore | None = None

    @classmethod
    async def open(cls, path: str, **options: Any) -> AsyncSqliteStore:
        """Open off the event loop (bootstrap and file checks run on a thread).

        A caller cancelled meanwhile gets ``CancelledError`` once the open has
        ended and what it opened is closed again: nothing leaks.
        """
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, partial(cls, path, **options))
        try:
            return await finish_uncancelled(future)
        except asyncio.CancelledError:
            if not future.cancelled() and future.exception() is None:
                store = future.result().sync_store
                await wait_out(loop.run_in_executor(None, store.close))
            raise

    @property
    def path(self) -> str:
        return self.sync_store.path

    @property
    def lease_ttl_ms(self) -> int:
        return self.sync_store.lease_ttl_ms

    def __repr__(self) -> str:
        return f"<AsyncSqliteStore {self.path!r}>"

    def transcripts(self) -> AsyncSqliteTranscriptStore:
        """Return the memoized fenced blob twin (same file, door and fence)."""
        if self._twin is None:
            self._twin = AsyncSqliteTranscriptStore(self.sync_store.transcripts())
        return self._twin

    async def aclose(self) -> None:
        """Close once queued work has run; idempotent. In a forked child, touch nothing."""
        door = self._door
        if door.closed:
            return
        if door.fork.forked:
            door.close()  # marks it closed only: the connection is the parent's
            return
        try:
            closing = door.hop(asyncio.get_running_loop(), "close", door.close)
        except StoreClosedError:
            return  # closed meanwhile by another caller
        await wait_out(closing)

    # -- writes: the sync store's operations, through the shared door ------------

    async def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        await _write(self._door, self.sync_store._append_op(run_id, entry, lease))

    async def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        await _write(self._door, self.sync_store._put_meta_op(meta, lease))

    async def delete(self, run_id: str, lease: Lease | None = None) -> None:
        await _write(self._door, self.sync_store._delete_op(run_id, lease))

    async def acquire(self, run_id: str, owner: str) -> Lease:
        return await _write(self._door, self.sync_store._acquire_op(run_id, owner))

    async def renew(self, lease: Lease) -> None:
        await _write(self._door, self.sync_store._renew_op(lease))

    async def release(self, lease: Lease) -> None:
        await _write(self._door, self.sync_store._release_op(lease))

    async def in_brief_lease(self, run_id: str, owner: str, work: BriefWork[T]) -> T:
        """The sync store's ``in_brief_lease``: the work runs on the door's thread."""
        return await _write(self._door, self.sync_store._brief_op(run_id, owner, work))

    async def brief_put(
        self,
        owner: str,
        ref: str,
        blob: BlobInput,
        under: str,
        tail: str,
        meta: RunMeta | None = None,
        meta_replaces: bool = True,
        need_prior: bool = False,
    ) -> bool:
        """The sync store's ``brief_put``: one transaction."""
        put = brief_put_args(owner, ref, blob, under, tail, meta)
        op = self.sync_store._brief_put_op(put, meta_replaces, need_prior)
        return await _write(self._door, op)

    async def put_meta_and_release(self, meta: RunMeta, lease: Lease) -> None:
        """The sync store's ``put_meta_and_release``: one transaction."""
        await _write(self._door, self.sync_store._put_meta_and_release_op(meta, lease))

    async def put_with_meta(
        self,
        ref: str,
        blob: bytes | bytearray | memoryview,
        meta: RunMeta,
        lease: Lease,
    ) -> None:
        """The sync store's ``put_with_meta``: one transaction."""
        await _write(
            self._door, self.sync_store._put_with_meta_op(ref, blob, meta, lease)
        )

    # -- reads: whole on the worker thread -----------------------------------------

    async def load(self, run_id: str) -> list[JournalEntry]:
        return await _call(self._door, "load", lambda: self.sync_store.load(run_id))

    async def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        store = self.sync_store
        return await _call(
            self._door, "load_since", lambda: store.load_since(run_id, cursor)
        )

    async def get_meta(self, run_id: str) -> RunMeta | None:
        store = self.sync_store
        return await _call(self._door, "get_meta", lambda: store.get_meta(run_id))

    async def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        store = self.sync_store
        return await _call(self._door, "list_runs", lambda: store.list_runs(run_filter))


@final
@dataclass(frozen=True, slots=True)
class AsyncQueuedPut:
    """A put queued by ``AsyncSqliteTranscriptStore.queue_put``: pass it to ``await_put``."""

    ref: str
    lease: Lease | None
    op: Operation[None]
    # The loop time its linger ends, while it waits for company as the next
    # batch's leader; None once queued behind a leader.
    deadline: float | None


@final
@instrumented(lambda twin: sqlite_target(twin._door.path), role="blobs")
class AsyncSqliteTranscriptStore(AsyncClosing, Observed):
    """The fenced blob twin of an ``AsyncSqliteStore``: its writes share the door."""

    async_api: Final = True
    fenced_writes: Literal[True] = True

    def __init__(self, twin: SqliteFencedTranscriptStore) -> None:
        self.sync_store: Final = twin
        self._door: Final = twin._door

    async def aclose(self) -> None:
        """A no-op: the twin lives and dies with its journal handle (T7)."""

    async def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        await _write(self._door, self.sync_store._put_op(ref, blob, lease))

    async def queue_put(
        self,
        ref: str,
        blob: BlobInput,
        lease: Lease | None = None,
        linger_s: float = QUEUE_LINGER_S,
    ) -> AsyncQueuedPut:
        """The sync twin's ``queue_put`` for coroutines: share the next write's COMMIT.

        The first write of the store submitted within ``linger_s`` carries the
        put in its transaction (one WAL flush for both); with none, it commits
        alone then. Finish it with ``await_put``.

        Raises:
            InvalidArgumentError: a bad ref, blob or lease, here; ``await_put``
                raises the write's own errors.
        """
        op = self.sync_store._put_op(ref, blob, lease)
        loop = asyncio.get_running_loop()
        op.resume = (loop, loop.create_future())
        lingers = self._door.queue_detached(op)
        return AsyncQueuedPut(
            ref, lease, op, loop.time() + linger_s if lingers else None
        )

    async def await_put(self, queued: AsyncQueuedPut) -> bool:
        """Return once a ``queue_put`` write is durable, or raise as ``put``.

        Returns whether a write came within the linger to share its COMMIT. A
        cancelled waiter's put is never committed unless a batch took it
        already (then the cancel waits for that batch, as ``put``'s does).
        """
        op, door = queued.op, self._door
        assert op.resume is not None  # set by queue_put
        loop, future = op.resume
        alone = False

        def linger_over() -> None:
            nonlocal alone
            alone = door.end_linger(op)

        timer = (
            None
            if queued.deadline is None
            else loop.call_at(queued.deadline, linger_over)
        )
        try:
            await future
        except asyncio.CancelledError:
            if not door.withdraw_queued(op):
                # A batch carries it: it ends whole first.
                await _wait_for_batch(op, loop)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        op.outcome()
        if armed():  # the caller's own after-commit failpoint, as ``_write`` runs it
            await finish_uncancelled(
                loop.run_in_executor(None, op.context.run, door.after_commit, op)
            )
        return not alone

    async def flush_queued(self) -> None:
        """Return once every put queued so far is decided (before a read that must see it).

        A write that changes nothing goes through the door after them: it
        takes the lead from a lingering put, or queues behind a batch the
        worker is still handing over, and the door decides in queue order.
        """
        if self._door.queued():
            await _write(self._door, Operation("flush_queued", None, _unchanged, True))

    async def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """``put_many`` through the door: the batch is ONE operation of a commit (T11)."""
        op = self.sync_store._put_many_op(items, lease)
        if op is not None:
            await _write(self._door, op)

    async def delete(self, ref: str, lease: Lease | None = None) -> None:
        await _write(self._door, self.sync_store._delete_op(ref, lease))

    async def get(self, ref: str) -> bytes | None:
        twin = self.sync_store
        return await _call(self._door, "blob_get", lambda: twin.get(ref))

    async def list_refs(self, run_id: str) -> list[str]:
        twin = self.sync_store
        return await _call(self._door, "blob_list", lambda: twin.list_refs(run_id))

    async def last_ref(self, run_id: str, prefix: str) -> str | None:
        twin = self.sync_store
        return await _call(
            self._door, "blob_last_ref", lambda: twin.last_ref(run_id, prefix)
        )

    async def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        twin = self.sync_store
        return await _call(
            self._door, "blob_get_under", lambda: twin.get_under(run_id, prefix)
        )
