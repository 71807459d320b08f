"""Real threads racing a takeover: the write loop and the rounds both race suites run.

``thread-races`` (one writer per surface) and ``shared-handle`` (many writers on
one handle) differ in who writes; how a writer loops, how its calls are split
at the takeover and how rounds are bounded are the same, and live here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rulvar_conformance.harness.failpause import fast_switching
from rulvar_conformance.harness.kit import Outcome
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.suites._windows import Handles, open_handles
from rulvar_store.backend import LocationFactory

__all__ = ["WriteLoop", "late_successes", "race_rounds"]


@dataclass
class WriteLoop:
    """One thread's leased writes, over and over, until refused or stopped.

    ``call(tag)`` makes write number ``tag`` and returns its outcome. ``calls``
    keeps each call's start (``perf_counter``) beside its outcome, so a check can
    tell the calls that began after a takeover; ``started`` is set once one
    call has returned.
    """

    call: Callable[[int], Outcome[None]]
    max_writes: int
    stop: threading.Event = field(default_factory=threading.Event)
    calls: list[tuple[float, Outcome[None]]] = field(default_factory=list)
    started: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        for tag in range(1, self.max_writes):
            if self.stop.is_set():
                return
            began = time.perf_counter()
            outcome = self.call(tag)
            self.calls.append((began, outcome))
            self.started.set()
            if not outcome.ok:
                return


def late_successes(loops: Iterable[WriteLoop], taken_at: float) -> list[Outcome[None]]:
    """The calls that began after the takeover at ``taken_at`` and still succeeded."""
    return [
        outcome
        for loop in loops
        for began, outcome in loop.calls
        if began > taken_at and outcome.ok
    ]


def race_rounds(
    locations: LocationFactory,
    rounds: int,
    min_rounds: int,
    budget_s: float,
    one_round: Callable[[Handles, int], None],
) -> None:
    """Run ``one_round(handles, number)`` on one fresh shared location.

    Stops after ``rounds`` rounds, or once ``budget_s`` has passed and
    ``min_rounds`` ran, under a fast thread switch interval so threads
    interleave finely.
    """
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        deadline = time.monotonic() + budget_s
        with fast_switching():
            for round_no in range(rounds):
                if round_no >= min_rounds and time.monotonic() > deadline:
                    break
                one_round(h, round_no)
