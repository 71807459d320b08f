"""The leasable suite: leases, epochs and the fence (CONTRACT 8.3).

Built by ``leasable_suite(certification)`` or, over plain factories,
``leasable_store_conformance(mk, ...)``. The mandatory checks make a lease stale
by release and re-acquire, never by sleeping, so their stores have a ttl no
stall can cross (600 000 ms).
Only ``lease-ttl-and-renew-cadence`` sleeps real wall time, on a store of its
own with a short ttl (``ExpiryPairing``): measuring expiry is its whole point.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import (
    CERTIFY_TTL_MS,
    Certification,
    SuiteSpec,
    fresh_leasable,
)
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    Fresh,
    Outcome,
    attempt,
    build_check,
    each_fresh,
    require,
)
from rulvar_conformance.suites.journal import conf_entry, seqs_of
from rulvar_store import ConfigError, LeasableStore, LeaseHeldError
from rulvar_store.backend import validate_ttl_ms

__all__ = ["SPEC", "ExpiryPairing", "leasable_store_conformance", "leasable_suite"]

RUN: Final = "lease-run"
EXPIRING_RUN: Final = "expiring-run"

Mk = Callable[[], LeasableStore]


@dataclass(frozen=True)
class ExpiryPairing:
    """A short-ttl store factory for the one wall-clock check.

    ``ttl_ms`` must equal the ttl of the stores ``mk`` builds; a few hundred ms
    (300-600 for SQLite and memory, 1200 for Postgres) keeps the check short.
    """

    ttl_ms: int
    mk: Mk


def _require_lease_held(outcome: Outcome[Any], what: str) -> None:
    require(not outcome.ok, f"{what} succeeded; it must raise LeaseHeldError")
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"{what} raised {outcome.error!r}, not LeaseHeldError",
    )


def _exclusive_acquire(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        first = store.acquire(RUN, "owner-a")
        require(
            (first.run_id, first.owner) == (RUN, "owner-a"),
            f"acquire returned {first!r} for run {RUN!r}, owner 'owner-a'",
        )
        require(
            isinstance(first.epoch, int) and not isinstance(first.epoch, bool),
            f"epoch {first.epoch!r} is not an int",
        )
        blocked = attempt(lambda: store.acquire(RUN, "owner-b"))
        _require_lease_held(blocked, "a second owner's acquire of a live lease")
        store.release(first)
        second = store.acquire(RUN, "owner-b")
        require(second.owner == "owner-b", f"after release acquire gave {second!r}")
        require(second.epoch > first.epoch, f"epoch {second.epoch} !> {first.epoch}")
        store.release(second)


def _fencing_stale_epoch(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        stale = store.acquire(RUN, "writer-a")
        store.append(RUN, conf_entry(0), stale)
        store.release(stale)
        fresh = store.acquire(RUN, "writer-b")
        require(fresh.epoch > stale.epoch, f"epoch {fresh.epoch} !> {stale.epoch}")
        store.append(RUN, conf_entry(1), fresh)
        late = attempt(lambda: store.append(RUN, conf_entry(2), stale))
        _require_lease_held(late, "an append with a superseded epoch")
        seqs = seqs_of(store.load(RUN))
        require(seqs == [0, 1], f"journal holds seqs {seqs}, expected [0, 1]")


def _fencing_epoch_tombstone(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        zombie = store.acquire(RUN, "owner-stable")
        store.append(RUN, conf_entry(0), zombie)
        store.release(zombie)
        store.delete(RUN)
        reborn = store.acquire(RUN, "owner-stable")
        require(
            reborn.epoch > zombie.epoch,
            f"after delete the epoch restarted: {reborn.epoch} !> {zombie.epoch}",
        )
        store.append(RUN, conf_entry(0), reborn)
        late = attempt(lambda: store.append(RUN, conf_entry(1), zombie))
        _require_lease_held(late, "a zombie append of the deleted incarnation")
        _require_lease_held(
            attempt(lambda: store.renew(zombie)),
            "a zombie renew of the deleted incarnation",
        )
        seqs = seqs_of(store.load(RUN))
        require(seqs == [0], f"journal holds seqs {seqs}, expected [0]")


def _release_fences(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        lease = store.acquire(RUN, "owner-a")
        store.renew(lease)
        store.release(lease)
        _require_lease_held(attempt(lambda: store.renew(lease)), "renew after release")
        late = attempt(lambda: store.append(RUN, conf_entry(0), lease))
        _require_lease_held(late, "append after release")
        loaded = store.load(RUN)
        require(loaded == [], f"a released lease appended {len(loaded)} entries")


def _ttl_and_renew_cadence(ttl_ms: int, stores: Fresh[LeasableStore]) -> None:
    ttl_s = ttl_ms / 1000
    interval_s = max(1, ttl_ms // 3) / 1000
    with stores() as store:
        held = store.acquire(RUN, "renewer")
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < 1.5 * ttl_s:
            time.sleep(interval_s)
            renewed = attempt(lambda: store.renew(held))
            require(
                renewed.ok,
                f"renew every ttl/3 failed after {elapsed * 1000:.0f} ms: {renewed.error!r}",
            )
            taken = attempt(lambda: store.acquire(RUN, "challenger"))
            _require_lease_held(taken, "acquiring a lease renewed every ttl/3")
        store.release(held)
        sleeper = store.acquire(EXPIRING_RUN, "sleeper")
        time.sleep(1.2 * ttl_s)
        taker = attempt(lambda: store.acquire(EXPIRING_RUN, "taker"))
        require(
            taker.ok and taker.value is not None,
            f"an unrenewed lease was not acquirable after 1.2 x ttl: {taker.error!r}",
        )
        epoch = taker.value.epoch if taker.value is not None else None
        require(
            epoch is not None and epoch > sleeper.epoch,
            f"the expired run was re-acquired at epoch {epoch}, not above {sleeper.epoch}",
        )


def leasable_store_conformance(
    mk: Mk, *, expiry: ExpiryPairing | None = None, ttl_ms: int | None = None
) -> ConformanceSuite:
    """Build the leasable suite over ``mk`` (fresh isolated stores, long ttl).

    ``expiry`` adds the wall-clock check on its own short-ttl stores. A bare
    ``ttl_ms`` is the legacy single pairing (that check then uses ``mk``, whose
    ttl must be ``ttl_ms``); with neither, the expiry check is omitted.

    Raises:
        ConfigError: both ``expiry`` and ``ttl_ms`` given, or a bad ttl (D9).
    """
    if expiry is not None and ttl_ms is not None:
        raise ConfigError(
            "pass expiry=ExpiryPairing(...) or the legacy ttl_ms, not both"
        )
    if ttl_ms is not None:
        expiry = ExpiryPairing(ttl_ms, mk)
    if expiry is None:
        return _suite(each_fresh(mk), None)
    validate_ttl_ms(expiry.ttl_ms)
    return _suite(each_fresh(mk), (expiry.ttl_ms, each_fresh(expiry.mk)))


def leasable_suite(certification: Certification) -> ConformanceSuite:
    """Build the leasable suite over the certification's fresh locations.

    The wall-clock check gets stores of the certification's short expiry ttl.
    """
    ttl_ms = certification.expiry_ttl_ms
    return _suite(
        partial(fresh_leasable, certification, CERTIFY_TTL_MS),
        (ttl_ms, partial(fresh_leasable, certification, ttl_ms)),
    )


def _suite(
    stores: Fresh[LeasableStore], expiry: tuple[int, Fresh[LeasableStore]] | None
) -> ConformanceSuite:
    table: list[tuple[str, str, tuple[str, ...], Callable[[Fresh[LeasableStore]], None]]] = [
        ("lease-exclusive-acquire", "one live lease per run; release frees it",
         ("L1", "L3"), _exclusive_acquire),
        ("fencing-stale-epoch", "a superseded epoch can no longer append",
         ("L3", "L4", "L6"), _fencing_stale_epoch),
        ("fencing-epoch-tombstone", "epochs survive delete; the old owner stays out",
         ("L4", "L5", "L6"), _fencing_epoch_tombstone),
        ("lease-release-fences", "a released lease can neither renew nor append",
         ("L6",), _release_fences),
    ]  # fmt: skip
    checks: list[ConformanceCheck] = [
        build_check(check_id, title, clauses, partial(body, stores))
        for check_id, title, clauses, body in table
    ]
    if expiry is not None:
        checks.append(
            build_check(
                "lease-ttl-and-renew-cadence",
                "renewing every ttl/3 holds a lease; an unrenewed one expires",
                ("L8", "L1", "L3", "D8"),
                partial(_ttl_and_renew_cadence, *expiry),
            )
        )
    return ConformanceSuite("leasable", tuple(checks))


SPEC: Final = SuiteSpec(
    "leasable", leasable_suite, "leases", True, "leases, epochs (8.3)"
)
