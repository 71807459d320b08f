"""The moves of the forced-race checks: a writer paused in its window, a competitor.

``Handles`` are three handles on one location: ``a`` writes (its own clock,
``clock_a``), ``b`` competes (fail-fast when the location offers contention), ``c``
only observes. ``b`` and ``c`` share the world clock ``clock``. Both clocks
start equal; a check moves them together, or moves only the world clock to play a
writer whose host clock lags (P5: safety never rests on a clock, the epoch
alone fences, so a lagging writer must still be refused after a takeover).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Generic, TypeVar

from rulvar_conformance.harness.failpause import (
    PAUSE_LIMIT_S,
    Background,
    FailpointPause,
    Hit,
    hits_of,
)
from rulvar_conformance.harness.kit import Outcome, attempt, not_run, require
from rulvar_conformance.harness.site import ManualClock, Site
from rulvar_conformance.harness.surfaces import entry, expect_refused, leasable
from rulvar_store import Lease, LeaseHeldError, OpenedStore, StoreBusyError

__all__ = [
    "FAIL_FAST_PATIENCE_S",
    "QUEUE_S",
    "WAIT_PATIENCE_S",
    "WINDOW_TAG",
    "WINDOW_TTL_MS",
    "Competitor",
    "Handles",
    "await_pause",
    "dry_hits",
    "open_handles",
    "refused_or_waiting",
    "require_failpoints",
    "successor_holds",
    "take_over",
]

T = TypeVar("T")

WINDOW_TTL_MS: Final = 100
"""Lease ttl under the injected clocks: test time, never waited out."""

FAIL_FAST_PATIENCE_S: Final = 5.0
"""How long a fail-fast competitor may take to give up (busy timeouts are 100-200 ms)."""

WAIT_PATIENCE_S: Final = 0.3
"""How long a blocking competitor is watched for a win inside a window."""

WINDOW_TAG: Final = 500
"""Tag (and seq) of a raced write: above every seq a check stores before it."""

TAKEOVER_PATIENCE_S: Final = 30.0
"""How long a takeover may keep getting StoreBusyError behind racing writers."""
QUEUE_S: Final = 0.2
"""Time given to a writer to make its checks and queue behind a paused takeover."""


@dataclass(frozen=True)
class Handles:
    """Writer ``a``, competitor ``b``, observer ``c`` on one location, and the clocks."""

    a: OpenedStore
    b: OpenedStore
    c: OpenedStore
    clock_a: ManualClock
    clock: ManualClock
    fail_fast: bool

    def advance_all(self, delta_ms: int) -> int:
        """Move both clocks; return the new world time."""
        self.clock_a.advance(delta_ms)
        return self.clock.advance(delta_ms)


def open_handles(site: Site) -> Handles:
    """Open the three handles (the site needs ``shared`` and ``clock``)."""
    clock_a, clock = ManualClock(), ManualClock()
    fail_fast = site.location.contention
    return Handles(
        a=site.open(WINDOW_TTL_MS, now=clock_a),
        b=site.open(WINDOW_TTL_MS, now=clock, fail_fast=fail_fast),
        c=site.open(WINDOW_TTL_MS, now=clock),
        clock_a=clock_a,
        clock=clock,
        fail_fast=fail_fast,
    )


def await_pause(pause: FailpointPause, writer: Background[Any], what: str) -> None:
    """Wait until the writer stands at its failpoint; fail if it finished instead."""
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while not pause.reached.wait(0.01):
        if writer.done:
            require(
                False,
                f"expected {what} to reach {pause.where}, observed it return "
                f"({writer.outcome.error or 'ok'}) after hits {pause.seen}; a store "
                "that calls failpoints must call every one on every fenced write",
            )
        require(
            time.monotonic() < deadline,
            f"{what} did not reach {pause.where} within {PAUSE_LIMIT_S:.0f} s",
        )


class Competitor(Generic[T]):
    """A competing call started inside a window and watched while the window is open.

    ``in_window`` is its outcome if it finished while watched, else ``None`` (it
    was still waiting, as a blocked call should). ``finish()`` waits for the end.
    """

    def __init__(self, call: Callable[[], T], fail_fast: bool) -> None:
        self._call = Background(call)
        self._patience = FAIL_FAST_PATIENCE_S if fail_fast else WAIT_PATIENCE_S
        self.in_window: Outcome[T] | None = None

    def watch(self) -> Competitor[T]:
        self._call.start()
        if self._call.wait(self._patience):
            self.in_window = self._call.outcome
        return self

    def finish(self) -> Outcome[T]:
        require(
            self._call.wait(PAUSE_LIMIT_S + 10),
            "a competing call never finished after the window closed",
        )
        return self._call.outcome

    @property
    def won_in_window(self) -> bool:
        return self.in_window is not None and self.in_window.ok


def refused_or_waiting(competitor: Competitor[Any], what: str, where: str) -> None:
    """Inside a window the competitor may wait, or raise StoreBusyError/LeaseHeldError."""
    seen = competitor.in_window
    if seen is None:
        return
    require(
        not seen.ok,
        f"expected {what} to wait or raise StoreBusyError while the writer stood "
        f"{where}, observed it succeed ({seen.value!r}): the fence check and the "
        "guarded write are not one transaction (L7, X3)",
    )
    require(
        isinstance(seen.error, StoreBusyError | LeaseHeldError),
        f"expected {what} inside the window to wait or raise the retryable "
        f"StoreBusyError, observed {seen.error!r} (D16)",
    )


def dry_hits(call: Callable[[], object], what: str) -> list[Hit]:
    """The failpoints ``call`` reaches when nothing races it (it must succeed)."""
    hits, outcome = hits_of(call)
    require(outcome.ok, f"{what} (no race) failed: {outcome.error!r}")
    return hits


def require_failpoints(h: Handles) -> None:
    """Stop as not run unless the store calls failpoints at all."""
    lease = leasable(h.a).acquire("probe-failpoints", "prober")
    hits = dry_hits(
        lambda: h.a.journal.append("probe-failpoints", entry(0, "a", 0), lease),
        "a leased append",
    )
    if not hits:
        not_run(
            "the store never calls rulvar_store.backend.hit, so no window can "
            "be forced open; the thread-races suite races real threads instead"
        )


def successor_holds(h: Handles, run_id: str, successor: Lease, why: str) -> None:
    """The successor's lease is intact: a third owner is refused, its holder renews."""
    intruder = attempt(partial(leasable(h.c).acquire, run_id, "owner-c"))
    expect_refused(
        intruder, f"a third owner's acquire while the successor is live ({why})"
    )
    leasable(h.b).renew(successor)


def take_over(h: Handles, run_id: str) -> Lease:
    """Take ``run_id`` over through handle ``b`` (its lease expired for the world).

    A busy answer is contention behind the racing writers, not a verdict: the
    takeover is tried again for up to ``TAKEOVER_PATIENCE_S``.
    """
    deadline = time.monotonic() + TAKEOVER_PATIENCE_S
    while True:
        taken = attempt(partial(leasable(h.b).acquire, run_id, "owner-b"))
        if taken.ok and taken.value is not None:
            return taken.value
        require(
            isinstance(taken.error, StoreBusyError),
            f"expected the takeover of an expired lease to succeed, observed "
            f"{taken.error!r}",
        )
        require(
            time.monotonic() < deadline,
            f"expected the takeover to get the write lock within "
            f"{TAKEOVER_PATIENCE_S:.0f} s of retrying StoreBusyError, observed it "
            "starved behind the old holder's writes",
        )
