"""``thread_races_conformance(certification)``: real threads race a takeover.

The failpoint checks (``forced_races``) force a window open deterministically,
but only in stores that call failpoints, and only where the store calls them. A
store that checks the lease before its write transaction with every failpoint
inside it, or a store without failpoints at all (an in-memory one), is raced
here instead: writer ``a`` loops leased writes on one surface while handle ``b``
takes the run over at a random moment; the writer's clock lags (it believes its
lease live, P5), so only the epoch can stop it. Right after the takeover the run
is read through a third handle; when the writer has stopped, that reading must
still hold (no write of the old lease landed after the takeover), no writer call
that started after the takeover returned may have succeeded, and the successor's
lease must be intact. Many short rounds under a fast thread switch interval,
bounded by a round count and a time budget, make a check-outside-transaction
store fail with high probability.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import Background
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Outcome,
    attempt,
    build_check,
    require,
)
from rulvar_conformance.harness.surfaces import (
    SURFACES,
    Surface,
    blob,
    blob_ref,
    entry,
    leasable,
    meta,
    prepare,
    require_capability,
    state_of,
)
from rulvar_conformance.suites._thread_loop import (
    WriteLoop,
    late_successes,
    race_rounds,
)
from rulvar_conformance.suites._windows import (
    WINDOW_TTL_MS,
    Handles,
    successor_holds,
    take_over,
)
from rulvar_store import Lease
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "thread_races_conformance"]

ROUNDS: Final = 400
MIN_ROUNDS: Final = 8
BUDGET_S: Final = 0.6
"""Per check: stop after ROUNDS rounds, or after BUDGET_S once MIN_ROUNDS ran."""
MAX_WRITES: Final = 400

Caps = frozenset[str]


@dataclass
class _Writer:
    """The old holder's writes on one surface; a ``WriteLoop`` repeats them."""

    h: Handles
    surface: Surface
    lease: Lease

    def step(self, tag: int) -> None:
        a, lease, name = self.h.a, self.lease, self.surface.name
        if name == "blob-delete" and tag % 2 == 0:
            a.transcripts.put(blob_ref(lease.run_id), blob("a", tag), lease)
        elif name == "delete" and tag % 2 == 0:
            a.journal.append(lease.run_id, entry(tag, "a", tag), lease)
        elif name == "put-meta":
            a.journal.put_meta(meta(lease.run_id, "a", tag), lease)
        else:
            self.surface.write(a, lease, tag)
        if name in ("release", "delete") and (name == "release" or tag % 2 == 1):
            # The lease row is gone: take it again on the writer's (lagging) clock.
            self.lease = leasable(a).acquire(lease.run_id, "owner-a")

    def attempt(self, tag: int) -> Outcome[None]:
        return attempt(partial(self.step, tag))


def _round(
    h: Handles, caps: Caps, surface: Surface, run_id: str, rng: random.Random
) -> None:
    lease = leasable(h.a).acquire(run_id, "owner-a")
    prepare(h.a, lease, caps)
    h.clock.advance(3 * WINDOW_TTL_MS)  # expired for the world; the writer's clock lags
    writer = WriteLoop(_Writer(h, surface, lease).attempt, MAX_WRITES)
    loop = Background(writer.run).start()
    require(writer.started.wait(30), "the writer never started")
    time.sleep(rng.random() * 0.002)
    successor = take_over(h, run_id)
    taken_at = time.perf_counter()
    seen = state_of(h.c, run_id, caps, first=surface.touches)
    writer.stop.set()
    require(loop.wait(30), f"the writer's {surface.name} loop never stopped")
    late = late_successes([writer], taken_at)
    require(
        not late,
        f"expected every {surface.name} of the old lease that began after another "
        f"handle's takeover returned to be refused, observed {len(late)} succeed "
        "(L6, L7)",
    )
    after = state_of(h.c, run_id, caps)
    require(
        after.same_as(seen),
        f"expected the run as read right after the takeover to stay, observed a "
        f"{surface.name} of the superseded lease land later: {seen} became {after} "
        "(the lease is checked outside the write transaction: L7, X3)",
    )
    successor_holds(h, run_id, successor, f"after the old holder's {surface.name} loop")


def _race(locations: LocationFactory, caps: Caps, surface: Surface) -> None:
    require_capability(caps, surface.capability)
    rng = random.Random(f"thread-races-{surface.name}")

    def one_round(h: Handles, round_no: int) -> None:
        _round(h, caps, surface, f"thread-race-{surface.name}-{round_no}", rng)

    race_rounds(locations, ROUNDS, MIN_ROUNDS, BUDGET_S, one_round)


def thread_races_conformance(certification: Certification) -> ConformanceSuite:
    """Build the thread-races suite over fresh shared locations with a clock (X3, L7)."""
    locations, capabilities = certification.locations, certification.capabilities
    checks = tuple(
        build_check(
            f"race-{surface.name}",
            f"a takeover racing a {surface.name} loop of real threads never lets a "
            "superseded write land",
            ("X3", "L7", "L6", "F3"),
            partial(_race, locations, capabilities, surface),
        )
        for surface in SURFACES
    )
    return ConformanceSuite("thread-races", checks)


SPEC: Final = SuiteSpec(
    "thread-races",
    thread_races_conformance,
    "leases",
    True,
    "real threads race a takeover against leased writes on every surface",
)
