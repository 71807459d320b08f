"""SQLite stores whose queued puts (Q19) are wrong in one plausible way each.

Each is the real ``SqliteStore`` with a door (``GroupCommitter``) that gets one
piece of queueing wrong; every other write, and every queued put the defect
does not touch, behaves as the honest door's.
"""

from __future__ import annotations

import time
from typing import Any, Generic, TypeVar, cast

from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._group_commit import GroupCommitter, Queued
from rulvar_store_sqlite._transaction import Operation

__all__ = [
    "AckedEarly",
    "ArrivalFirst",
    "FlushIgnored",
    "QueueKeptApart",
    "UnfencedQueue",
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


class _UnfencedQueueDoor(GroupCommitter):
    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        op.fence = None  # the lease was checked when the put was queued
        return super().queue(op, linger_s)


class UnfencedQueue(SqliteStore):
    """A queued put skips the fence check in its transaction."""

    _door_type = _UnfencedQueueDoor
