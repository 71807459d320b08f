"""A hold's task writes in flight: queued to share the next write's COMMIT.

``put_writes`` under a hold queues its blob write (``queue_put``) inside the
thread's lock and awaits it outside (the sync saver in a thread, the asyncio
saver in a task), so the step's checkpoint, which LangGraph
puts right after, can join the same transaction (one WAL flush for both).
Outside the lock the write is still in flight, so whatever reads the thread
under the lock first lands it (``land``, ``aland``): the saver's
read-modify-write of a task's writes must see every write it queued.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, final

__all__ = ["InFlightWrites"]

Landed = threading.Event | asyncio.Event


@final
class InFlightWrites:
    """The queued writes of one saver not yet landed, by run.

    ``flush`` is the blob store's ``flush_queued`` (a coroutine function for
    an asyncio saver, whose writes are marked with ``asyncio.Event``s).
    """

    def __init__(self, flush: Callable[[], Any], asyncio_saver: bool = False) -> None:
        self._flush = flush
        self._event: Callable[[], Landed] = (
            asyncio.Event if asyncio_saver else threading.Event
        )
        self._mutex = threading.Lock()
        self._by_run: dict[str, list[Landed]] = {}

    def add(self, run_id: str) -> Landed:
        """Note a write queued for ``run_id``; pass the result to ``done`` once decided."""
        landed = self._event()
        with self._mutex:
            self._by_run.setdefault(run_id, []).append(landed)
        return landed

    def done(self, run_id: str, landed: Landed) -> None:
        """The write is decided (landed or failed): readers go on."""
        with self._mutex:
            events = self._by_run.get(run_id)
            if events is not None:
                events.remove(landed)
                if not events:
                    del self._by_run[run_id]
        landed.set()

    def _pending(self, run_id: str) -> list[Landed]:
        with self._mutex:
            return list(self._by_run.get(run_id, ()))

    def land(self, run_id: str) -> None:
        """Return once every write queued for ``run_id`` so far is decided (sync saver).

        A lingering write is made to commit now rather than at its deadline.
        """
        events = self._pending(run_id)
        if events:
            self._flush()
        for landed in events:
            assert isinstance(landed, threading.Event)
            landed.wait()

    async def aland(self, run_id: str) -> None:
        """``land`` for the asyncio saver."""
        events = self._pending(run_id)
        if events:
            await self._flush()
        for landed in events:
            assert isinstance(landed, asyncio.Event)
            await landed.wait()

    def reader(self, run_id: str) -> Callable[[], None] | None:
        """The sync ``before_read`` hook for a plan on ``run_id``, if it has writes in flight."""
        return (lambda: self.land(run_id)) if run_id in self._by_run else None

    def areader(self, run_id: str) -> Callable[[], Awaitable[None]] | None:
        """The asyncio ``before_read`` hook, likewise."""
        return (lambda: self.aland(run_id)) if run_id in self._by_run else None
