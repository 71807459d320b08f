"""``forced_races_conformance(certification)``: check-then-act windows, forced.

X3 made deterministic with the failpoint seam: a writer's fenced call is
paused INSIDE its window (after its fence check passed, before its commit); while
it stands there its lease expires and a second handle tries to take the run over
and to append the same seq. Neither may succeed inside the window: the fence
check and the guarded write are one transaction (L7), so the competitor waits
(or, on a fail-fast handle, raises the retryable ``StoreBusyError``). Let go,
the writer commits whole; then the takeover lands and every later write of the
old lease is refused. Each fenced surface gets its own check (append, put_meta,
delete, blob put, blob delete, renew, release). The writer is also paused at
every OTHER failpoint it reaches, where a takeover may land, but then the
writer's call must end refused unless its write was already visible. Finally
the roles flip: the takeover is paused just before its commit while the old
holder (whose host clock lags) writes; a store that checks the lease before its
write transaction lets that write through, an honest one refuses it. Two more
windows are held open elsewhere (``_process_window``): in a spawned child, raced
by a release from this process (X12: exclusion that lives in one process), and
at one location, raced by the same run id at another (X11: locations share no
lock).

The failpoint contract (what a third-party store calls, from
``rulvar_store.backend``): every fenced mutation AND ``acquire`` call
``hit(operation, point)`` on the calling thread, in this order:

1. ``"after-begin"``: the write transaction is open (SQLite: after ``BEGIN
   IMMEDIATE``; PostgreSQL: after ``BEGIN``);
2. ``"after-fence-check"``: the lease was checked (for ``acquire``: the run was
   found free) inside that transaction, which now holds whatever keeps another
   handle from changing the lease row (the write lock, the run's advisory lock);
3. ``"before-commit"``: the mutation is done and not yet committed;
4. ``"after-commit"``: the transaction committed.

Operation names: ``append``, ``put_meta``, ``delete``, ``blob_put``,
``blob_delete``, ``acquire``, ``renew``, ``release``. A store that never calls
``hit`` gets these checks reported as not run, with the reason; the
``thread-races`` suite races real threads against it instead.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import (
    Background,
    FailpointPause,
    Hit,
    installed,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    require,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import (
    SURFACES,
    Surface,
    entry,
    expect_refused,
    leasable,
    prepare,
    require_capability,
    stale_everywhere,
    state_of,
)
from rulvar_conformance.suites._process_window import (
    locations_independent,
    window_across_processes,
)
from rulvar_conformance.suites._queued import (
    queued_acquire_race,
    queued_behind_takeover,
    queued_epoch_race,
    queued_seq_race,
)
from rulvar_conformance.suites._windows import (
    WINDOW_TAG,
    WINDOW_TTL_MS,
    Competitor,
    Handles,
    await_pause,
    dry_hits,
    open_handles,
    refused_or_waiting,
    require_failpoints,
    successor_holds,
)
from rulvar_store import JournalOrderViolation, Lease
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "STRICT_POINTS", "forced_races_conformance"]

STRICT_POINTS: Final = ("after-fence-check", "before-commit")
"""Inside these the writer's lease was checked and its write is not yet committed."""


READ_PATIENCE_S: Final = 2.0
"""How long a read through the observer may take while the writer is paused."""

Caps = frozenset[str]


def _surface_hits(h: Handles, caps: Caps, surface: Surface) -> list[Hit]:
    run_id = f"probe-{surface.name}"
    lease = leasable(h.a).acquire(run_id, "prober")
    prepare(h.a, lease, caps)
    hits = dry_hits(partial(surface.write, h.a, lease, WINDOW_TAG), surface.name)
    for point in STRICT_POINTS:
        require(
            (surface.operation, point) in hits,
            f"expected a leased {surface.name} to call failpoint "
            f"({surface.operation!r}, {point!r}) like the other writes, observed "
            f"only {hits}",
        )
    return hits


def _window(
    h: Handles, caps: Caps, surface: Surface, index: int, run_id: str
) -> tuple[Lease, Lease, bool]:
    """Pause the writer at hit ``index`` of its call and compete.

    Returns the writer's lease, the successor's lease, and whether the pause was
    inside the strict window.
    """
    stale = leasable(h.a).acquire(run_id, "owner-a")
    prepare(h.a, stale, caps)
    before = state_of(h.c, run_id, caps)
    pause = FailpointPause(index)
    with installed(pause.hook):
        writer = Background(
            partial(surface.write, h.a, stale, WINDOW_TAG), before=pause.aim
        ).start()
        try:
            await_pause(pause, writer, f"the writer's {surface.name}")
            strict = pause.seen[index] in {
                (surface.operation, p) for p in STRICT_POINTS
            }
            h.advance_all(WINDOW_TTL_MS + 50)  # the writer's lease is now expired
            take = partial(leasable(h.b).acquire, run_id, "owner-b")
            takeover = Competitor(take, h.fail_fast).watch()
            rival = None
            if strict and surface.name == "append":
                rival_call = partial(
                    h.b.journal.append, run_id, entry(WINDOW_TAG, "b", WINDOW_TAG)
                )
                rival = Competitor(rival_call, h.fail_fast).watch()
            # A store whose reads wait for its writers cannot be read here; the
            # reading then stays unknown instead of stalling the window.
            reading = Background(partial(state_of, h.c, run_id, caps)).start()
            read_in_window = reading.wait(READ_PATIENCE_S)
        finally:
            pause.release()
        require(writer.wait(30), f"the writer's {surface.name} never finished")
        taken = takeover.finish()
        rival_end = rival.finish() if rival is not None else None
    where = f"at {pause.where}"
    during = reading.outcome.value if read_in_window else None
    done = writer.outcome
    after = state_of(h.c, run_id, caps)
    if strict:
        refused_or_waiting(takeover, "the other handle's acquire", where)
        require(
            done.ok,
            f"expected the writer's {surface.name}, paused {where} after its fence "
            f"check passed, to commit whole once let go, observed {done.error!r}",
        )
        require(
            surface.lease_row or not after.same_as(before),
            f"expected the committed {surface.name} visible through another "
            f"handle, observed the run unchanged: {after}",
        )
        if rival is not None and rival_end is not None:
            refused_or_waiting(
                rival, "the other handle's append of the same seq", where
            )
            require(
                rival.in_window is not None
                or isinstance(rival_end.error, JournalOrderViolation),
                f"expected the other handle's append of seq {WINDOW_TAG}, queued "
                f"behind the writer's, to raise JournalOrderViolation, observed "
                f"{rival_end.error or 'success'} (J6)",
            )
    elif (
        takeover.won_in_window
        and during is not None
        and during.same_as(before)
        and not surface.lease_row
    ):
        expect_refused(
            done,
            f"the writer's {surface.name} let go after another handle took the run "
            f"over while it stood {where} with nothing written yet",
        )
        require(
            after.same_as(during),
            f"expected the run unchanged after the takeover {where}, observed the "
            f"superseded {surface.name} land: {during} became {after} (L7, X3)",
        )
    if taken.ok and taken.value is not None:
        return stale, taken.value, strict
    h.advance_all(3 * WINDOW_TTL_MS)  # past any renew the writer committed
    return stale, leasable(h.b).acquire(run_id, "owner-b"), strict


def _forced_window(locations: LocationFactory, caps: Caps, surface: Surface) -> None:
    require_capability(caps, surface.capability)
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        require_failpoints(h)
        hits = _surface_hits(h, caps, surface)
        checked_everywhere = False
        for index in range(len(hits)):
            run_id = f"race-{surface.name}-{index}"
            stale, successor, strict = _window(h, caps, surface, index, run_id)
            if strict and not checked_everywhere:
                checked_everywhere = True
                stale_everywhere(h.a, stale, h.c, caps, "taken over after its window")
            successor_holds(
                h, run_id, successor, f"after the window at hit {index + 1}"
            )
        queued_behind_takeover(h, caps, surface, f"queued-{surface.name}")


def _x3_stale_renew(locations: LocationFactory, caps: Caps) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        start = h.clock()
        stale = leasable(h.a).acquire("x3-run", "owner-a")
        h.advance_all(150)
        leasable(h.b).acquire("x3-run", "owner-b")
        expect_refused(
            attempt(partial(leasable(h.a).renew, stale)), "the stale renew (X3)"
        )
        h.clock.set(start + 240)
        intruder = attempt(partial(leasable(h.c).acquire, "x3-run", "owner-c"))
        expect_refused(
            intruder, "a third owner's acquire at +240 (the successor holds to +250)"
        )
        h.clock.set(start + 260)
        late = attempt(partial(leasable(h.c).acquire, "x3-run", "owner-c"))
        require(
            late.ok,
            f"expected the run acquirable at +260 (the successor's lease ends at +250 "
            f"and the refused stale renew must not extend it), observed {late.error!r}",
        )


def forced_races_conformance(certification: Certification) -> ConformanceSuite:
    """Build the forced-races suite over fresh shared locations with a clock (X3)."""
    locations, capabilities = certification.locations, certification.capabilities
    checks = [
        build_check(
            f"x3-window-{surface.name}",
            f"a takeover cannot land inside a {surface.name}'s fence-to-commit window",
            ("X3", "L7", "L6", "F3"),
            partial(_forced_window, locations, capabilities, surface),
        )
        for surface in SURFACES
    ]
    checks += [
        build_check(
            "x3-queued-seq-race",
            "an append queued behind another handle's append of the same seq fails",
            ("J6", "L7"),
            partial(queued_seq_race, locations, capabilities),
        ),
        build_check(
            "x3-queued-epoch-race",
            "an acquire queued behind an acquire and release gets a higher epoch",
            ("L2", "L3"),
            partial(queued_epoch_race, locations, capabilities),
        ),
        build_check(
            "x3-queued-acquire-race",
            "an acquire queued behind another handle's acquire finds the run leased",
            ("L1", "L2", "L7"),
            partial(queued_acquire_race, locations, capabilities),
        ),
        build_check(
            "x3-window-across-processes",
            "a release from another process cannot land inside a child's append window",
            ("X12", "X3", "L7"),
            partial(window_across_processes, locations, capabilities),
        ),
        build_check(
            "x11-locations-independent",
            "a window held open at one location never holds up the same run id at another",
            ("X11",),
            partial(locations_independent, locations, capabilities),
        ),
        build_check(
            "x3-stale-renew",
            "after a takeover at +150 (ttl 100) a stale renew fails; free at +260",
            ("X3", "L6", "L8"),
            partial(_x3_stale_renew, locations, capabilities),
        ),
    ]
    return ConformanceSuite("forced-races", tuple(checks))


SPEC: Final = SuiteSpec(
    "forced-races",
    forced_races_conformance,
    "leases",
    True,
    "failpoint-forced check-then-act windows on every fenced surface (X3)",
)
