"""``lease_lifetime_conformance(certification)``: the edges of a lease's life, on a manual clock.

A lease is live while ``expires_at > now`` (``expires_at == now`` is expired),
``acquire`` sets ``expires_at = now + ttl`` and ``renew`` sets it to ``now +
ttl`` again, from the renewal's now, not from the old expiry (L1, L8, D8). The
checks inject a ``ManualClock`` and probe both sides of every boundary to the
millisecond, so no wall-clock sleep is needed and no timing can flake. The
clock-free checks cover re-acquire by the same owner (L1), the reported ttl
(L9) and the lease row's removal by ``delete`` (M6, L5).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.probe import (
    describe,
    expect_lease_held,
    expect_ok,
    fenced_journal,
    is_leasable,
)
from rulvar_conformance.harness.site import ManualClock, Site, at_fresh_location
from rulvar_conformance.suites.journal import conf_entry
from rulvar_store import LeasableStore, Lease
from rulvar_store.backend import LocationFactory

__all__ = ["BOUNDARY_TTLS_MS", "REPORTED_TTLS_MS", "SPEC", "lease_lifetime_conformance"]

BOUNDARY_TTLS_MS: Final = (1, 1_000, 2_345)
"""ttls whose expiry boundary is probed: the 1 ms edge and two unround ones."""

REPORTED_TTLS_MS: Final = (1, 2_345, 600_000, 2_147_483_647)
"""ttls ``lease_ttl_ms`` must report back, the D9 bounds included."""

LONG_TTL_MS: Final = 600_000


def _leasable(site: Site, ttl_ms: int, clock: ManualClock | None) -> LeasableStore:
    opened = site.open(ttl_ms, now=clock)
    if not is_leasable(opened):
        not_run("needs a leasable journal store (acquire, renew, release)")
    journal = opened.journal
    assert isinstance(journal, LeasableStore)
    return journal


def _blocked(store: LeasableStore, run: str, owner: str, what: str) -> None:
    expect_lease_held(attempt(lambda: store.acquire(run, owner)), what)


def _granted(store: LeasableStore, run: str, owner: str, what: str) -> Lease:
    taken = attempt(lambda: store.acquire(run, owner))
    require(
        taken.ok and taken.value is not None,
        f"{what}: expected the acquire to succeed, observed {describe(taken.error)}",
    )
    assert taken.value is not None
    return taken.value


def _expiry_boundary(locations: LocationFactory) -> None:
    for ttl in BOUNDARY_TTLS_MS:
        clock = ManualClock()
        with at_fresh_location(locations, needs=("clock",)) as site:
            store = _leasable(site, ttl, clock)
            run, start = f"boundary-{ttl}", clock()
            lease = store.acquire(run, "holder")
            clock.set(start + ttl - 1)
            _blocked(
                store, run, "challenger",
                f"ttl {ttl}: a challenger's acquire at acquired + ttl - 1 ms "
                "(expires_at > now: the lease is live)",
            )  # fmt: skip
            expect_ok(
                partial(store.append, run, conf_entry(0), lease),
                f"ttl {ttl}: the holder's append at acquired + ttl - 1 ms (still live)",
            )
            clock.set(start + ttl)
            late = attempt(partial(store.append, run, conf_entry(1), lease))
            expect_lease_held(
                late,
                f"ttl {ttl}: the holder's append at exactly acquired + ttl "
                "(expires_at == now is expired)",
            )
            for what, call in (
                ("renew", partial(store.renew, lease)),
                ("release", partial(store.release, lease)),
            ):
                expect_lease_held(
                    attempt(call),
                    f"ttl {ttl}: the holder's {what} at exactly acquired + ttl "
                    "(expires_at == now is expired)",
                )
            taker = _granted(
                store, run, "challenger",
                f"ttl {ttl}: a challenger's acquire at exactly acquired + ttl "
                "(expires_at == now is expired)",
            )  # fmt: skip
            require(
                taker.epoch > lease.epoch,
                f"ttl {ttl}: expected the taker's epoch above {lease.epoch}, "
                f"observed {taker.epoch} (L3)",
            )


def _renew_from_now(locations: LocationFactory) -> None:
    ttl = 1_000
    clock = ManualClock()
    with at_fresh_location(locations, needs=("clock",)) as site:
        store = _leasable(site, ttl, clock)
        for renew_at in (ttl // 2, ttl - 1, 1):
            run, start = f"renew-{renew_at}", clock()
            lease = store.acquire(run, "holder")
            clock.set(start + renew_at)
            expect_ok(partial(store.renew, lease), f"renew at acquired + {renew_at} ms")
            expires = start + renew_at + ttl
            clock.set(start + ttl)
            _blocked(
                store, run, "challenger",
                f"a challenger at the ORIGINAL expiry, after a renew at +{renew_at} ms "
                "(renew must extend the lease)",
            )  # fmt: skip
            clock.set(expires - 1)
            _blocked(
                store, run, "challenger",
                f"a challenger at renewed-at + ttl - 1 ms (renew at +{renew_at} ms, "
                f"ttl {ttl}: the lease lives until +{renew_at + ttl} ms)",
            )  # fmt: skip
            expect_ok(
                partial(store.append, run, conf_entry(0), lease),
                "the holder's append with its renewed lease (renew keeps the epoch)",
            )
            clock.set(expires)
            _granted(
                store, run, "challenger",
                f"a challenger at exactly renewed-at + ttl (renew at +{renew_at} ms, "
                f"ttl {ttl}): renew extends from now, not from the old expiry",
            )  # fmt: skip


def _dead_holder_one_ttl(locations: LocationFactory) -> None:
    ttl = 1_000
    clock = ManualClock()
    with at_fresh_location(locations, needs=("clock",)) as site:
        store = _leasable(site, ttl, clock)
        run, start = "dead-holder", clock()
        dead = store.acquire(run, "dead-holder")
        for offset in (0, 1, ttl // 2, ttl - 1):
            clock.set(start + offset)
            _blocked(
                store, run, f"challenger-{offset}",
                f"a challenger at +{offset} ms of a {ttl} ms lease never renewed",
            )  # fmt: skip
        clock.set(start + ttl)
        taker = _granted(
            store, run, "challenger",
            f"a challenger at exactly +{ttl} ms after refused attempts at +0..+{ttl - 1} "
            "ms (a refused acquire must not extend the dead holder's lease)",
        )  # fmt: skip
        require(
            taker.epoch > dead.epoch,
            f"expected the taker's epoch above {dead.epoch}, observed {taker.epoch} (L3)",
        )
        for what, call in (
            ("renew", lambda: store.renew(dead)),
            ("append", lambda: store.append(run, conf_entry(0), dead)),
            ("release", lambda: store.release(dead)),
        ):
            expect_lease_held(attempt(call), f"the dead holder's {what} after takeover")
        clock.set(start + ttl + ttl - 1)
        _blocked(
            store, "dead-holder", "dead-holder",
            "the dead holder's re-acquire while the taker's lease is live",
        )  # fmt: skip
        clock.set(start + 2 * ttl)
        back = _granted(
            store, run, "dead-holder",
            "the old owner's acquire once the taker's lease expired",
        )  # fmt: skip
        require(
            back.epoch > taker.epoch,
            f"expected the re-acquired epoch above {taker.epoch}, observed {back.epoch}",
        )
        clock.set(start + 3 * ttl)
        again = _granted(
            store, run, "dead-holder",
            "the same owner's acquire of its own lease once it expired (L1)",
        )  # fmt: skip
        require(
            again.epoch > back.epoch,
            f"expected the re-acquired epoch above {back.epoch}, observed {again.epoch}",
        )


def _same_owner_no_reacquire(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        store = _leasable(site, LONG_TTL_MS, None)
        run = "same-owner"
        first = store.acquire(run, "owner-a")
        again = attempt(lambda: store.acquire(run, "owner-a"))
        expect_lease_held(
            again, "the same owner's second acquire of its own live lease (L1)"
        )
        expect_ok(
            lambda: store.append(run, conf_entry(0), first),
            "the first lease's append after the refused re-acquire",
        )
        expect_ok(lambda: store.renew(first), "the first lease's renew")
        store.release(first)
        second = _granted(
            store, run, "owner-a", "the same owner's acquire after release"
        )
        require(
            second.epoch > first.epoch,
            f"expected the new epoch above {first.epoch}, observed {second.epoch}",
        )
        stale = attempt(lambda: store.append(run, conf_entry(1), first))
        expect_lease_held(stale, "the same owner's old epoch after it re-acquired")


def _ttl_reported(locations: LocationFactory) -> None:
    for ttl in REPORTED_TTLS_MS:
        with at_fresh_location(locations) as site:
            opened = site.open(ttl)
            reported = getattr(opened.journal, "lease_ttl_ms", None)
            if reported is None:
                not_run("the store does not expose lease_ttl_ms (L9 SHOULD)")
            require(
                reported == ttl and type(reported) is int,
                f"a store opened with ttl_ms={ttl}: expected lease_ttl_ms == {ttl}, "
                f"observed {reported!r}",
            )


def _delete_removes_lease(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        opened = site.open(LONG_TTL_MS)
        if not is_leasable(opened):
            not_run("needs a leasable journal store (acquire, renew, release)")
        store = opened.journal
        assert isinstance(store, LeasableStore)
        variants = ["unleased"] + (["leased"] if fenced_journal(opened) else [])
        for variant in variants:
            run = f"deleted-{variant}"
            held = store.acquire(run, "owner-a")
            store.append(run, conf_entry(0), held)
            store.delete(run, held if variant == "leased" else None)
            taker = _granted(
                store, run, "owner-b",
                f"another owner's acquire right after a {variant} delete of the run "
                "(delete removes the lease row, M6)",
            )  # fmt: skip
            require(
                taker.epoch > held.epoch,
                f"after a {variant} delete: expected an epoch above {held.epoch}, "
                f"observed {taker.epoch} (the counter survives delete, L5)",
            )
            expect_lease_held(
                attempt(partial(store.append, run, conf_entry(0), held)),
                f"the deleted incarnation's append after a {variant} delete",
            )
            loaded = store.load(run)
            require(
                loaded == [],
                f"after a {variant} delete: expected an empty journal, "
                f"observed {len(loaded)} entries",
            )


def lease_lifetime_conformance(certification: Certification) -> ConformanceSuite:
    """Build the lease-lifetime suite over fresh locations of a leasable store."""
    locations = certification.locations
    table: list[tuple[str, str, tuple[str, ...], Callable[[LocationFactory], None]]] = [
        ("lease-expiry-boundary",
         "a lease is live at acquired + ttl - 1 ms and expired at exactly + ttl",
         ("L1", "L6", "D8"), _expiry_boundary),
        ("lease-renew-extends-from-now",
         "renew sets expiry to now + ttl, not old expiry + ttl",
         ("L8", "L1", "D8"), _renew_from_now),
        ("lease-dead-holder-blocks-one-ttl",
         "an unrenewed lease blocks takeover for exactly one ttl, then is fenced",
         ("L1", "L8", "L6", "L3", "D8"), _dead_holder_one_ttl),
        ("lease-same-owner-no-reacquire",
         "the same owner cannot re-acquire its own live lease",
         ("L1", "L3", "L6"), _same_owner_no_reacquire),
        ("lease-ttl-reported",
         "lease_ttl_ms reports the ttl the store was opened with",
         ("L9", "D9"), _ttl_reported),
        ("lease-delete-removes-row",
         "delete removes the lease row; the next acquire gets a higher epoch",
         ("M6", "L5", "L3"), _delete_removes_lease),
    ]  # fmt: skip
    checks: tuple[ConformanceCheck, ...] = tuple(
        build_check(check_id, title, clauses, partial(body, locations))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("lease-lifetime", checks)


SPEC: Final = SuiteSpec(
    "lease-lifetime",
    lease_lifetime_conformance,
    "leases",
    True,
    "expiry boundary, renew from now, ttl, delete frees (L1, L8, L9, M6)",
)
