"""SQLite stores whose queued puts (Q19) are wrong in one plausible way each.

Each is the real ``SqliteStore`` with a door (``GroupCommitter``) that gets one
piece of queueing wrong; every other write, and every queued put the defect
does not touch, behaves as the honest door's.

Two more defects of the asyncio PostgreSQL store's queue, patched in by the
self-tests (its classes are final):

- ``async_put_leaving_the_queue``: ``put`` sends itself alone, so a put queued
  under its lease waits out its linger instead of riding along;
- ``first_write_stays``: the rider batch keeps a ref's FIRST write, so a queued
  put wins over the later put of the same ref.

And three of the asyncio SQLite store's queue (``async_sqlite_*``): an
``await_put`` that answers before the put landed, a ``queue_put`` that waits
out its linger alone, a ``flush_queued`` that does nothing.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from typing import Any, Generic, TypeVar, cast

from rulvar_store import BlobInput, Lease
from rulvar_store_postgres._async_store import AsyncPostgresFencedTranscriptStore
from rulvar_store_postgres._queued import QueuedPut
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._async_store import AsyncQueuedPut, AsyncSqliteTranscriptStore
from rulvar_store_sqlite._group_commit import GroupCommitter, Queued
from rulvar_store_sqlite._transaction import Operation

__all__ = [
    "AckedEarly",
    "ArrivalFirst",
    "CommitsAtOnce",
    "FlushIgnored",
    "QueueKeptApart",
    "UnfencedQueue",
    "async_put_leaving_the_queue",
    "async_sqlite_acked_early",
    "async_sqlite_flush_ignored",
    "async_sqlite_queue_apart",
    "first_write_stays",
]

T = TypeVar("T")


class _FlushIgnoredDoor(GroupCommitter):
    def flush(self) -> None:
        self.fork.check("flush")  # as if a lingering put needed no help


class FlushIgnored(SqliteStore):
    """``flush_queued`` does nothing: a queued put lands only when its linger ends."""

    _door_type = _FlushIgnoredDoor


class _Unwaited(Generic[T]):
    """Stands in for ``Queued`` (a final class): returns at once, as if decided."""

    accompanied = True

    def wait(self) -> T | None:
        return None  # the seeded defect: nothing awaited


class _AckedEarlyDoor(GroupCommitter):
    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        super().queue(op, linger_s)
        return cast("Queued[T]", _Unwaited[T]())


class AckedEarly(SqliteStore):
    """``await_put`` returns before the queued put is committed."""

    _door_type = _AckedEarlyDoor


class _ArrivalFirstDoor(GroupCommitter):
    def run_batch(self, batch: list[Operation[Any]], more: Any) -> None:
        batch.reverse()  # the newest write first, the queued one after it
        super().run_batch(batch, more)


class ArrivalFirst(SqliteStore):
    """A batch applies its writes newest first: a carried queued put lands last."""

    _door_type = _ArrivalFirstDoor


class _KeptApart(Generic[T]):
    """Stands in for ``Queued``: commits its put alone once the linger is over,
    whatever came meanwhile."""

    def __init__(self, door: GroupCommitter, op: Operation[T], until: float) -> None:
        self.accompanied = True
        self._door, self._op, self._until = door, op, until

    def wait(self) -> T:
        op = self._op
        if not op.done:
            time.sleep(max(0.0, self._until - time.monotonic()))
        if not op.done:
            self.accompanied = False
            return self._door.submit(op)
        return op.outcome()


class _KeptApartDoor(GroupCommitter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.apart: list[Operation[Any]] = []

    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        self.apart.append(op)  # beside the write queue: no write carries it
        return cast("Queued[T]", _KeptApart(self, op, time.monotonic() + linger_s))

    def flush(self) -> None:
        apart, self.apart = self.apart, []
        for op in apart:
            if not op.done:
                self.submit(op)


class QueueKeptApart(SqliteStore):
    """Queued puts wait beside the write queue: no later write carries them."""

    _door_type = _KeptApartDoor


class _CommitsAtOnceDoor(GroupCommitter):
    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        # "Why wait?": the put commits now, alone, and is reported as queued.
        with suppress(Exception):  # its error is for await_put, as a queued one's
            self.submit(op)
        return Queued(self, op, None)


class CommitsAtOnce(SqliteStore):
    """``queue_put`` commits the put at once, alone: it never shares a COMMIT."""

    _door_type = _CommitsAtOnceDoor


class _UnfencedQueueDoor(GroupCommitter):
    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        op.fence = None  # the lease was checked when the put was queued
        return super().queue(op, linger_s)


class UnfencedQueue(SqliteStore):
    """A queued put skips the fence check in its transaction."""

    _door_type = _UnfencedQueueDoor


async def async_put_leaving_the_queue(
    self: AsyncPostgresFencedTranscriptStore,
    ref: str,
    blob: BlobInput,
    lease: Lease | None = None,
) -> None:
    """The asyncio PostgreSQL ``put``, sent alone: its lease's queued puts stay queued."""
    store = self._open("blob put")
    await store._call(store._plans.blob_put(ref, blob, lease))


def first_write_stays(
    riders: list[QueuedPut], *tail: tuple[str, bytes]
) -> list[tuple[str, bytes]]:
    """``last_writes`` backwards: a ref's first write (a queued put) is the one kept."""
    kept = dict(tail)
    kept.update({rider.ref: rider.blob for rider in riders})
    return list(kept.items())


# -- the asyncio SQLite store's queue (its class is final: patched in) ------------


async def async_sqlite_acked_early(
    self: AsyncSqliteTranscriptStore, queued: AsyncQueuedPut
) -> bool:
    """``await_put`` that answers at once: the put is acknowledged before it landed."""
    return True


async def async_sqlite_queue_apart(
    self: AsyncSqliteTranscriptStore,
    ref: str,
    blob: BlobInput,
    lease: Lease | None = None,
    linger_s: float = 0.0,
) -> AsyncQueuedPut:
    """``queue_put`` that waits out its linger on its own: the next put never carries it."""
    loop = asyncio.get_running_loop()
    op = self.sync_store._put_op(ref, blob, lease)

    async def alone() -> None:
        await asyncio.sleep(linger_s)
        await self.put(ref, blob, lease)

    landed: asyncio.Future[None] = loop.create_future()

    def done(_: object) -> None:
        if not landed.done():
            landed.set_result(None)

    loop.create_task(alone()).add_done_callback(done)
    op.succeed(None)
    op.resume = (loop, landed)
    return AsyncQueuedPut(ref, lease, op, None)


async def async_sqlite_flush_ignored(self: AsyncSqliteTranscriptStore) -> None:
    """``flush_queued`` that does nothing: a lingering put stays unseen until its deadline."""
