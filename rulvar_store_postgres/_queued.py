"""Queued blob puts of a PostgreSQL store: each rides the next put of its lease (Q19's twin).

A queued put (``queue_put``) waits up to its linger for a plain ``put`` under
the same lease; that put then sends both as ONE ``put_many`` statement (one
round trip, one commit, one fence verdict for both) and hands the queued put
its outcome. With no such put in time, ``await_put`` sends it alone. Queued
puts of one lease ride in the order they were queued, before the put that
carries them, so a later write of the same ref still wins. ``flush_queued``
sends whatever lingers at once, for a reader that must see it. The sync and
asyncio stores share this module; only the signal each waiter waits on
differs (``threading.Event``, ``asyncio.Event``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import final

from rulvar_store import Lease

__all__ = ["QueuedPut", "QueuedPuts", "acarried", "by_lease", "carried", "last_writes"]

Signal = threading.Event | asyncio.Event


@final
@dataclass(eq=False, slots=True)
class QueuedPut:
    """One queued put: its write, its deadline, then its outcome."""

    ref: str
    blob: bytes
    lease: Lease | None  # None: an unleased put, sent at once, never queued
    deadline: float
    decided: Signal
    error: BaseException | None = None
    accompanied: bool = True

    def left_s(self) -> float:
        """Seconds left of its linger."""
        return max(0.0, self.deadline - time.monotonic())


@final
class QueuedPuts:
    """The puts queued on one blob store and not yet taken, in queue order."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiting: list[QueuedPut] = []

    def queue(self, queued: QueuedPut) -> QueuedPut:
        with self._mutex:
            self._waiting.append(queued)
        return queued

    def take(self, lease: Lease | None) -> list[QueuedPut]:
        """The waiting puts of ``lease`` (a put under it carries them), removed."""
        if lease is None:
            return []
        with self._mutex:
            if not self._waiting:
                return []
            riders = [q for q in self._waiting if q.lease == lease]
            if riders:
                self._waiting = [q for q in self._waiting if q.lease != lease]
        return riders

    def take_all(self) -> list[QueuedPut]:
        with self._mutex:
            waiting, self._waiting = self._waiting, []
        return waiting

    def expired(self, queued: QueuedPut) -> list[QueuedPut]:
        """At ``queued``'s deadline: the puts of its lease to send now (maybe not it).

        ``queued`` among them waited in vain (``accompanied`` False); absent, a
        put took it meanwhile.
        """
        riders = self.take(queued.lease)
        queued.accompanied = queued not in riders
        return riders

    def withdraw(self, queued: QueuedPut) -> None:
        """An interrupted or cancelled waiter's put: never sent, if not taken yet."""
        with self._mutex:
            if queued in self._waiting:
                self._waiting.remove(queued)


def by_lease(waiting: list[QueuedPut]) -> list[list[QueuedPut]]:
    """``waiting`` split by lease, each group in queue order (one statement each)."""
    groups: dict[Lease | None, list[QueuedPut]] = {}
    for queued in waiting:
        groups.setdefault(queued.lease, []).append(queued)
    return list(groups.values())


def last_writes(
    riders: list[QueuedPut], *tail: tuple[str, bytes]
) -> list[tuple[str, bytes]]:
    """One ``(ref, blob)`` per ref, in order: the later write of a ref is the one that stays."""
    last = {rider.ref: rider.blob for rider in riders}
    last.update(tail)
    return list(last.items())


def _decide(riders: list[QueuedPut], error: BaseException | None) -> None:
    for rider in riders:
        rider.error = error
        rider.decided.set()


def carried(riders: list[QueuedPut], send: Callable[[], None]) -> None:
    """Run ``send`` (the carrying statement) and give each rider its outcome.

    Raises:
        BaseException: ``send``'s error, after the riders got it too.
    """
    try:
        send()
    except BaseException as exc:
        _decide(riders, exc)
        raise
    _decide(riders, None)


async def acarried(
    riders: list[QueuedPut], send: Callable[[], Awaitable[None]]
) -> None:
    """``carried`` for an awaited statement."""
    try:
        await send()
    except BaseException as exc:
        _decide(riders, exc)
        raise
    _decide(riders, None)
