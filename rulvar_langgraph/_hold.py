"""Holding a thread: one lease per invocation, renewed at a third of the ttl."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextlib import suppress

from rulvar_store import Lease, RulvarError

__all__ = ["AsyncRenewer", "Renewer"]


class Renewer:
    """A daemon thread renewing one lease every ``interval_s`` until stopped.

    A failed renew ends the renewals and is kept in ``lost``: the lease is gone
    (taken over or deleted), every later write with it is refused by the store,
    and nothing here tries to take it back.
    """

    def __init__(
        self, renew: Callable[[Lease], None], lease: Lease, interval_s: float
    ) -> None:
        self._renew = renew
        self._lease = lease
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.lost: RulvarError | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"rulvar-hold-{lease.run_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._renew(self._lease)
            except RulvarError as exc:
                self.lost = exc
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class AsyncRenewer:
    """The asyncio twin of ``Renewer``: a task on the running loop."""

    def __init__(
        self, renew: Callable[[Lease], Awaitable[None]], lease: Lease, interval_s: float
    ) -> None:
        self._renew = renew
        self._lease = lease
        self._interval_s = interval_s
        self.lost: RulvarError | None = None
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self._renew(self._lease)
            except RulvarError as exc:
                self.lost = exc
                return

    async def stop(self) -> None:
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task
