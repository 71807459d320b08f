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
    """The asyncio twin of ``Renewer``: a timer on the running loop.

    A task renews only when the timer fires: most holds end before their first
    renewal, and then the hold costs one timer handle, not a task to create,
    cancel and await. After each successful renew the timer is set again.
    """

    def __init__(
        self, renew: Callable[[Lease], Awaitable[None]], lease: Lease, interval_s: float
    ) -> None:
        self._renew = renew
        self._lease = lease
        self._interval_s = interval_s
        self.lost: RulvarError | None = None
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        # The latest renewal's task, kept until stop: stop awaits it, so an
        # unexpected error surfaces there, as from the task loop it replaces.
        self._renewal: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(
            interval_s, self._due
        )

    def _due(self) -> None:
        self._timer = None
        self._renewal = self._loop.create_task(self._renew_once())

    async def _renew_once(self) -> None:
        try:
            await self._renew(self._lease)
        except RulvarError as exc:
            self.lost = exc
            return
        if not self._stopped:
            self._timer = self._loop.call_later(self._interval_s, self._due)

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        renewal = self._renewal
        if renewal is not None:
            renewal.cancel()
            with suppress(asyncio.CancelledError):
                await renewal
