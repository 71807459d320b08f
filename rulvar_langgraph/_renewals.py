"""One renewal thread for every sync hold of the process.

A hold renews its lease every third of the ttl. A thread per hold made every
invocation pay a thread start (which waits until the new thread runs: on a
loaded machine, a scheduling round) and a join; most holds end before their
first renewal. Here a hold only files its lease in a heap and the one daemon
thread sleeps until the earliest is due, so opening and closing a hold costs a
lock and a notify.

``SharedRenewer`` keeps ``Renewer``'s contract: a failed renew ends that
hold's renewals and is kept in ``lost``; ``stop`` returns once no renewal of
the hold is running or will run. Renewals run one at a time on the thread:
a slow store delays the others' by that call, still well inside a ttl whose
third is the interval.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Final

from rulvar_store import Lease, RulvarError

__all__ = ["SharedRenewer"]

_NEVER: Final = float("inf")


class SharedRenewer:
    """One hold's renewals, run by the process's renewal thread."""

    __slots__ = (
        "_due",
        "_interval_s",
        "_lease",
        "_renew",
        "_running",
        "_stopped",
        "lost",
    )

    def __init__(
        self, renew: Callable[[Lease], None], lease: Lease, interval_s: float
    ) -> None:
        self._renew = renew
        self._lease = lease
        self._interval_s = interval_s
        self._stopped = False
        self._running = False
        self.lost: RulvarError | None = None
        _RENEWALS.add(self, time.monotonic() + interval_s)

    def _renew_now(self) -> float | None:
        """Renew once (on the renewal thread); the next due time, or ``None``: done."""
        try:
            self._renew(self._lease)
        except RulvarError as exc:
            self.lost = exc
            return None
        return time.monotonic() + self._interval_s

    def stop(self) -> None:
        """No renewal of this hold runs after this returns."""
        _RENEWALS.stop(self)


class _Renewals:
    """The heap of due renewals and the thread that runs them (started on first use)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, SharedRenewer]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, renewer: SharedRenewer, due: float) -> None:
        with self._cond:
            self._started()
            heapq.heappush(self._heap, (due, next(self._order), renewer))
            if self._heap[0][2] is renewer:  # earlier than the thread sleeps to
                self._cond.notify()

    def stop(self, renewer: SharedRenewer) -> None:
        with self._cond:
            renewer._stopped = True  # its heap entry is skipped when it comes due
            while renewer._running:
                self._cond.wait()

    def _started(self) -> None:
        # A forked child has the heap but not the thread: start its own.
        if self._thread is None or self._pid != os.getpid():
            self._heap = [entry for entry in self._heap if not entry[2]._stopped]
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=self._run, name="rulvar-hold-renewals", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                renewer = self._next_due()
                renewer._running = True
            due: float | None = None
            try:
                due = renewer._renew_now()
            except (
                Exception
            ):  # a store's untyped bug: this hold stops renewing, not all
                traceback.print_exc()
            finally:
                with self._cond:
                    renewer._running = False
                    if due is not None and not renewer._stopped:
                        heapq.heappush(self._heap, (due, next(self._order), renewer))
                    self._cond.notify_all()  # a stop waiting on this renewal

    def _next_due(self) -> SharedRenewer:
        """Wait (holding the condition) for the earliest live renewal to come due."""
        while True:
            while self._heap and self._heap[0][2]._stopped:
                heapq.heappop(self._heap)
            wait = self._heap[0][0] - time.monotonic() if self._heap else _NEVER
            if wait <= 0:
                return heapq.heappop(self._heap)[2]
            self._cond.wait(None if wait == _NEVER else wait)


_RENEWALS: Final = _Renewals()
