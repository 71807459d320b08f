"""Keeping a lease: renewals every ttl/3, and a loss the holder's work hears of (L10).

A keeper renews one lease until stopped and knows when it is gone: a renewal
refused (the run was taken over, released or deleted) or no renewal succeeded
before the lease's expiry (the store was unreachable, or this process was paused
past the ttl). Only a retryable store error (busy, unavailable) is retried; any
other error of a renewal (a closed store, a bug) loses the lease at once as
``"failed"``: retrying cannot cure it, and holding on until the expiry would let
the work run on a lease that is no longer kept. Either way ``owned`` turns false and ``ensure_owned`` raises
``LeaseLostError`` at once, by this process's own clock, without waiting for the
renewal thread or a round trip: a process resumed after a SIGSTOP sees its loss
before its next side effect. ``on_lost`` is called once with the error, so a
caller can cancel the work (an asyncio hold cancels its task).

The expiry is judged from the start of the call that set it (the acquire, then
each renewal): the store set ``now + ttl`` after that start, so this clock never
thinks a lease is live after the store stopped thinking so.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from rulvar_store._records import Lease
from rulvar_store.errors import LeaseHeldError, LeaseLostError, LostReason, RulvarError

__all__ = ["AsyncLeaseKeeper", "LeaseKeeper"]

OnLost = Callable[[LeaseLostError], None]

_WHY: dict[LostReason, str] = {
    "refused": "a renewal was refused (taken over, released or deleted)",
    "expired": "no renewal succeeded before it expired",
    "failed": "a renewal failed in a way retrying cannot cure (see the cause)",
}


def _transient(error: Exception) -> bool:
    """Whether a renewal's error may pass on retry: the store busy or unreachable."""
    return isinstance(error, RulvarError) and error.retryable


class _Tenancy:
    """The shared state of a keeper: the lease's deadline here, and its loss."""

    def __init__(self, lease: Lease, ttl_ms: int, since: float | None) -> None:
        self.lease = lease
        self.ttl_s = ttl_ms / 1000
        self.interval_s = self.ttl_s / 3
        # A transient failure (store busy or unreachable) is retried this often,
        # until the deadline passes.
        self.retry_s = max(0.01, self.interval_s / 5)
        self.deadline = (time.monotonic() if since is None else since) + self.ttl_s
        self.lost: LeaseLostError | None = None
        self.on_lost: OnLost | None = None
        self._told = False

    def check(self) -> LeaseLostError | None:
        """The loss, judging the deadline now (an expired lease is lost)."""
        if self.lost is None and time.monotonic() >= self.deadline:
            self._lose("expired", None)
        return self.lost

    def renewed(self, started: float) -> None:
        if self.lost is None:
            self.deadline = started + self.ttl_s

    def refused(self, error: LeaseHeldError) -> None:
        self._lose("refused", error)

    def failed(self, error: Exception) -> None:
        self._lose("failed", error)

    def _lose(self, reason: LostReason, cause: BaseException | None) -> None:
        lease = self.lease
        why = _WHY[reason]
        error = LeaseLostError(
            f"lost the lease of run {lease.run_id!r} (owner {lease.owner!r}, epoch "
            f"{lease.epoch}): {why}; stop the work and requeue it",
            lease.run_id,
            lease.owner,
            lease.epoch,
            reason,
        )
        error.__cause__ = cause
        self.lost = error

    def tell(self) -> None:
        """Call ``on_lost`` once, after the loss is recorded."""
        if self.lost is not None and not self._told and self.on_lost is not None:
            self._told = True
            self.on_lost(self.lost)

    def next_delay(self, failed: bool) -> float:
        """Seconds until the next attempt: ttl/3, or a retry, never past the deadline."""
        wait = self.retry_s if failed else self.interval_s
        return max(0.0, min(wait, self.deadline - time.monotonic()))


class _Owned:
    """What both keepers answer: ``owned``, ``lost`` and ``ensure_owned``."""

    _tenancy: _Tenancy

    @property
    def lease(self) -> Lease:
        return self._tenancy.lease

    @property
    def lost(self) -> LeaseLostError | None:
        """The loss, once the lease is gone (refused, or expired by this clock)."""
        return self._tenancy.check()

    @property
    def owned(self) -> bool:
        """Whether the lease is still this holder's; false for good once lost."""
        return self._tenancy.check() is None

    def ensure_owned(self) -> None:
        """Call before a side effect: raises once the lease is lost.

        Raises:
            LeaseLostError: the lease was refused on renewal or has expired.
        """
        lost = self._tenancy.check()
        if lost is not None:
            raise lost


class _FirstRenewals:
    """One process-wide thread that starts each keeper's own thread when its
    first renewal is due.

    Most holds end before their first renewal (ttl/3): a thread started and
    joined for each cost about 150 us of a short invocation's few ms. A keeper
    stopped before its first renewal now costs a heap entry, dropped when it
    comes due. A keeper's renewals, once due, run on its own thread as before,
    so one slow renewal never delays another keeper's.
    """

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._due: list[tuple[float, int, LeaseKeeper]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, due: float, keeper: LeaseKeeper) -> None:
        with self._wake:
            if self._pid != os.getpid():  # first use, or a forked child's
                self._pid = os.getpid()
                self._due = []  # the parent's keepers renew in the parent only
                self._thread = threading.Thread(
                    target=self._run, name="rulvar-lease-keepers", daemon=True
                )
                self._thread.start()
            heapq.heappush(self._due, (due, next(self._order), keeper))
            if self._due[0][2] is keeper:
                self._wake.notify()

    def _run(self) -> None:
        with self._wake:
            while True:
                while self._due and self._due[0][2].stopped:
                    heapq.heappop(self._due)
                if not self._due:
                    self._wake.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._due)[2]._begin()


_FIRST_RENEWALS = _FirstRenewals()


class LeaseKeeper(_Owned):
    """Renews ``lease`` every ttl/3 on a daemon thread until ``stop`` (L8, L10).

    ``renew`` is the store's ``renew``; ``ttl_ms`` its ``lease_ttl_ms``;
    ``since`` the ``time.monotonic()`` reading taken before the acquire (default:
    now). A refused renewal or a deadline passed without a renewal loses the
    lease for good; ``on_lost`` then runs once, on the keeper's thread. That
    thread starts when the first renewal is due (``_FirstRenewals``).
    """

    def __init__(
        self,
        renew: Callable[[Lease], None],
        lease: Lease,
        ttl_ms: int,
        *,
        on_lost: OnLost | None = None,
        since: float | None = None,
    ) -> None:
        self._tenancy = _Tenancy(lease, ttl_ms, since)
        self._tenancy.on_lost = on_lost
        self._renew = renew
        self._stop = threading.Event()
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None
        _FIRST_RENEWALS.add(time.monotonic() + self._tenancy.next_delay(False), self)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _begin(self) -> None:
        """The first renewal is due: start the keeper's thread, unless stopped."""
        with self._starting:
            if self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run,
                name=f"rulvar-lease-{self._tenancy.lease.run_id}",
                daemon=True,
            )
            self._thread.start()

    @classmethod
    def over(cls, store: Any, lease: Lease, **options: Any) -> LeaseKeeper:
        """A keeper using ``store.renew`` and ``store.lease_ttl_ms``."""
        return cls(store.renew, lease, store.lease_ttl_ms, **options)

    def _run(self) -> None:
        # Started when the first renewal is due: attempt at once, then wait.
        tenancy, failed = self._tenancy, False
        while not self._stop.is_set():
            if tenancy.check() is not None:
                break
            started = time.monotonic()
            try:
                self._renew(tenancy.lease)
            except LeaseHeldError as exc:
                tenancy.refused(exc)
                break
            except Exception as exc:
                if not _transient(exc):
                    tenancy.failed(exc)
                    break
                failed = True  # busy or unreachable: retry until the deadline
            else:
                failed = False
                tenancy.renewed(started)
            if self._stop.wait(tenancy.next_delay(failed)):
                break
        if not self._stop.is_set():
            tenancy.tell()

    def stop(self) -> None:
        """End the renewals (the lease stays as it is: release it yourself)."""
        self._stop.set()
        with self._starting:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> LeaseKeeper:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class AsyncLeaseKeeper(_Owned):
    """The asyncio twin of ``LeaseKeeper``: a timer on the running loop.

    A task renews only when the timer fires: most holds end before their first
    renewal, and then keeping costs one timer handle. ``on_lost`` runs once, on
    the loop (an asyncio hold cancels its invocation's task there).
    """

    def __init__(
        self,
        renew: Callable[[Lease], Awaitable[None]],
        lease: Lease,
        ttl_ms: int,
        *,
        on_lost: OnLost | None = None,
        since: float | None = None,
    ) -> None:
        self._tenancy = _Tenancy(lease, ttl_ms, since)
        self._tenancy.on_lost = on_lost
        self._renew = renew
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        # The latest renewal's task, kept until stop: stop awaits it, so an
        # unexpected error surfaces there.
        self._renewal: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._arm(failed=False)

    @classmethod
    def over(cls, store: Any, lease: Lease, **options: Any) -> AsyncLeaseKeeper:
        """A keeper using ``store.renew`` and the ttl the store (or its sync twin) tells."""
        ttl = getattr(store, "lease_ttl_ms", None)
        if ttl is None:
            ttl = store.sync_store.lease_ttl_ms
        return cls(store.renew, lease, ttl, **options)

    def _arm(self, *, failed: bool) -> None:
        if not self._stopped:
            self._timer = self._loop.call_later(
                self._tenancy.next_delay(failed), self._due
            )

    def _due(self) -> None:
        self._timer = None
        if self._tenancy.check() is not None:
            self._tenancy.tell()
            return
        self._renewal = self._loop.create_task(self._renew_once())

    async def _renew_once(self) -> None:
        tenancy = self._tenancy
        started = time.monotonic()
        try:
            await self._renew(tenancy.lease)
        except LeaseHeldError as exc:
            tenancy.refused(exc)
            if not self._stopped:
                tenancy.tell()
            return
        except Exception as exc:
            if not _transient(exc):
                tenancy.failed(exc)
                if not self._stopped:
                    tenancy.tell()
                return
            self._arm(failed=True)  # busy or unreachable: retry until the deadline
            return
        tenancy.renewed(started)
        self._arm(failed=False)

    async def stop(self) -> None:
        """End the renewals (the lease stays as it is: release it yourself)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        renewal = self._renewal
        if renewal is not None and renewal is not asyncio.current_task():
            renewal.cancel()
            with suppress(asyncio.CancelledError):
                await renewal

    async def __aenter__(self) -> AsyncLeaseKeeper:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
