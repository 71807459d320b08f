"""``worker_life_conformance(certification)``: a holder's death and a refusal's details.

Two checks of what a restarted worker relies on:

- ``refusal-names-the-holder`` (L12): a refused ``acquire`` raises a
  ``LeaseHeldError`` naming the live holder, its epoch and ``retry_after_ms``,
  when its lease expires unless renewed. On a manual clock, so exact.
- ``dead-holder-taken-over`` (L11): a spawned child process takes a lease (the
  location's ttl, a minute by default) and stays alive. Its live lease is refused
  to the parent while it runs and while it is stopped (``SIGSTOP``: a paused
  holder is alive); once it is ``SIGKILL``ed, the parent's acquire must be
  granted within ``TAKEOVER_BOUND_S``, far below the ttl, with a higher epoch.
  Needs a location other processes can open.
"""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.probe import describe, is_leasable
from rulvar_conformance.harness.processes import _spawned
from rulvar_conformance.harness.site import ManualClock, at_fresh_location
from rulvar_conformance.harness.surfaces import leasable
from rulvar_store import LeasableStore, LeaseHeldError
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = ["SPEC", "TAKEOVER_BOUND_S", "worker_life_conformance"]

RUN: Final = "worker-life-run"
TTL_MS: Final = 10_000
ELAPSED_MS: Final = 2_500
TAKEOVER_BOUND_S: Final = 10.0
"""How long a dead holder's live lease may still block: far below a default ttl."""
CHILD_START_S: Final = 120.0


def _refusal_names_the_holder(locations: LocationFactory) -> None:
    clock = ManualClock()
    with at_fresh_location(locations, needs=("clock",)) as site:
        opened = site.open(TTL_MS, now=clock)
        if not is_leasable(opened):
            not_run("needs a leasable journal store (acquire, renew, release)")
        store = opened.journal
        assert isinstance(store, LeasableStore)
        lease = store.acquire(RUN, "the-holder")
        clock.advance(ELAPSED_MS)
        refused = attempt(lambda: store.acquire(RUN, "a-successor"))
        error = refused.error
        require(
            isinstance(error, LeaseHeldError),
            f"acquire of a live lease must raise LeaseHeldError, observed "
            f"{describe(error)}",
        )
        assert isinstance(error, LeaseHeldError)
        seen = (error.owner, error.epoch, getattr(error, "retry_after_ms", None))
        wanted = ("the-holder", lease.epoch, TTL_MS - ELAPSED_MS)
        require(
            seen == wanted,
            f"the refusal must name the holder, its epoch and when its lease "
            f"expires (owner, epoch, retry_after_ms) = {wanted}, observed {seen} "
            "(L12)",
        )


def _child_holds(location: StoreLocation, report: Any) -> None:
    """In the spawned child: take the lease, say so, and live until killed."""
    try:
        opened = location.open()
        lease = leasable(opened).acquire(RUN, "child-holder")
        report.send(("ok", lease.epoch))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
        report.close()
        return
    report.close()
    while True:
        time.sleep(1)


def _refused(store: LeasableStore, what: str) -> None:
    taken = attempt(lambda: store.acquire(RUN, "the-successor"))
    require(
        isinstance(taken.error, LeaseHeldError),
        f"{what}: expected LeaseHeldError, observed "
        + ("a granted lease" if taken.ok else describe(taken.error)),
    )


def _dead_holder_taken_over(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        parent = leasable(site.open())
        with _spawned(_child_holds, (site.location,)) as (child, receive):
            message: Any = receive.recv() if receive.poll(CHILD_START_S) else None
            if message is None:
                not_run(
                    "a spawned child process never reported its lease; the calling "
                    "program's main module must be importable and guard its entry "
                    "point with if __name__ == '__main__'"
                )
            assert message is not None
            require(message[0] == "ok", f"the child's acquire failed: {message[1]}")
            child_epoch = int(message[1])
            _refused(parent, "the acquire of a run a running process holds (L1)")
            os.kill(child.pid, signal.SIGSTOP)
            os.waitpid(child.pid, os.WUNTRACED)  # stopped now, not just signalled
            _refused(
                parent,
                "the acquire of a run a stopped (SIGSTOP) process holds: a paused "
                "holder is alive (L11)",
            )
            os.kill(child.pid, signal.SIGKILL)
            child.join(30)
            killed = time.monotonic()
            while True:
                taken = attempt(lambda: parent.acquire(RUN, "the-successor"))
                if taken.ok:
                    break
                require(
                    isinstance(taken.error, LeaseHeldError)
                    and time.monotonic() - killed < TAKEOVER_BOUND_S,
                    f"the live lease of a SIGKILLed holder still blocks the run "
                    f"{TAKEOVER_BOUND_S:.0f} s after its death (last: "
                    f"{describe(taken.error)}): acquire must take over the lease "
                    "of a provably dead holder at once (L11)",
                )
                time.sleep(0.02)
            assert taken.value is not None
            require(
                taken.value.epoch > child_epoch,
                f"the takeover's epoch {taken.value.epoch} is not above the dead "
                f"holder's {child_epoch} (L3)",
            )


def worker_life_conformance(certification: Certification) -> ConformanceSuite:
    """The suite over ``certification``'s fresh locations."""
    locations = certification.locations
    specs = (
        (
            "refusal-names-the-holder",
            "a refused acquire names the holder, its epoch and retry_after_ms",
            ("L12",),
            _refusal_names_the_holder,
        ),
        (
            "dead-holder-taken-over",
            "a SIGKILLed holder's live lease is taken over at once, a stopped one's never",
            ("L11",),
            _dead_holder_taken_over,
        ),
    )
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, locations))
        for check_id, title, clauses, body in specs
    )
    return ConformanceSuite("worker-life", checks)


SPEC: Final = SuiteSpec(
    "worker-life",
    worker_life_conformance,
    "leases",
    True,
    "a refusal names holder and expiry; a dead holder is taken over at once (L11, L12)",
)
