"""The fenced-writes suite: leased meta writes and deletes are fenced (8.5).

Built by ``fenced_writes_suite(certification)`` or ``fenced_writes_conformance(mk)``.

Only for stores that declare ``fenced_writes = True`` (F5: the marker is a promise
this suite verifies). Leases go stale by release and re-acquire, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import (
    CERTIFY_TTL_MS,
    Certification,
    SuiteSpec,
    fresh_leasable,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Fresh,
    Outcome,
    attempt,
    build_check,
    each_fresh,
    require,
    same_json,
)
from rulvar_conformance.suites.journal import conf_entry, seqs_of
from rulvar_store import (
    LeasableStore,
    LeaseHeldError,
    RunMeta,
    has_fenced_writes,
    read_run_meta,
)

__all__ = ["SPEC", "fenced_meta", "fenced_writes_conformance", "fenced_writes_suite"]

RUN: Final = "fenced-run"
OTHER_RUN: Final = "fenced-other-run"

Mk = Callable[[], LeasableStore]


def fenced_meta(status: str, segments: int, run_id: str = RUN) -> RunMeta:
    """The suite's meta record: ``updatedAt`` names its status and segment."""
    return {
        "runId": run_id,
        "status": status,
        "segments": segments,
        "updatedAt": f"at-{status}-{segments}",
    }


def _rejected(outcome: Outcome[Any], what: str) -> None:
    require(not outcome.ok, f"{what} succeeded; the fence must refuse it")
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"{what} raised {outcome.error!r}, not LeaseHeldError",
    )


def _meta_is(store: LeasableStore, expected: RunMeta | None, when: str) -> None:
    actual = read_run_meta(store, RUN)
    require(
        same_json(actual, expected), f"{when}: meta is {actual!r}, not {expected!r}"
    )


def _seqs_are(store: LeasableStore, expected: list[int], when: str) -> None:
    seqs = seqs_of(store.load(RUN))
    require(seqs == expected, f"{when}: journal holds seqs {seqs}, not {expected}")


def _marker_declared(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        marker = getattr(store, "fenced_writes", None)
        require(
            has_fenced_writes(store), f"store.fenced_writes is {marker!r}, not True"
        )


def _meta_stale_rejected(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        stale = store.acquire(RUN, "writer-a")
        store.put_meta(fenced_meta("running", 2), stale)
        store.release(stale)
        fresh = store.acquire(RUN, "writer-b")
        store.put_meta(fenced_meta("running", 3), fresh)
        late = attempt(lambda: store.put_meta(fenced_meta("cancelled", 2), stale))
        _rejected(late, "a superseded owner's put_meta")
        _meta_is(store, fenced_meta("running", 3), "after the stale put_meta")


def _delete_stale_rejected(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        stale = store.acquire(RUN, "writer-a")
        store.append(RUN, conf_entry(0), stale)
        store.put_meta(fenced_meta("running", 1), stale)
        store.release(stale)
        fresh = store.acquire(RUN, "writer-b")
        _rejected(
            attempt(lambda: store.delete(RUN, stale)), "a superseded owner's delete"
        )
        _seqs_are(store, [0], "after the stale delete")
        _meta_is(store, fenced_meta("running", 1), "after the stale delete")
        store.delete(RUN, fresh)
        _seqs_are(store, [], "after the holder's delete")
        _meta_is(store, None, "after the holder's delete")


def _tombstone_zombie_rejected(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        zombie = store.acquire(RUN, "owner-stable")
        store.append(RUN, conf_entry(0), zombie)
        store.put_meta(fenced_meta("running", 1), zombie)
        store.release(zombie)
        store.delete(RUN)
        reborn = store.acquire(RUN, "owner-stable")
        store.append(RUN, conf_entry(0), reborn)
        store.put_meta(fenced_meta("running", 2), reborn)
        late = attempt(lambda: store.put_meta(fenced_meta("ok", 1), zombie))
        _rejected(late, "a zombie put_meta of the deleted incarnation")
        _rejected(attempt(lambda: store.delete(RUN, zombie)), "a zombie delete")
        _meta_is(store, fenced_meta("running", 2), "after the zombie writes")
        _seqs_are(store, [0], "after the zombie writes")


def _run_match(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        foreign = store.acquire(OTHER_RUN, "foreign")
        store.put_meta(fenced_meta("running", 1))
        store.append(RUN, conf_entry(0))
        cross = fenced_meta("cancelled", 1)
        _rejected(
            attempt(lambda: store.put_meta(cross, foreign)),
            "put_meta under a foreign lease",
        )
        late = attempt(lambda: store.append(RUN, conf_entry(1), foreign))
        _rejected(late, "append under a foreign lease")
        _rejected(
            attempt(lambda: store.delete(RUN, foreign)), "delete under a foreign lease"
        )
        _meta_is(store, fenced_meta("running", 1), "after the foreign-lease writes")
        _seqs_are(store, [0], "after the foreign-lease writes")
        intruder = attempt(lambda: store.acquire(OTHER_RUN, "intruder"))
        _rejected(intruder, "acquiring the foreign run after the refused calls")
        store.release(foreign)


def _unleased_passthrough(stores: Fresh[LeasableStore]) -> None:
    with stores() as store:
        store.put_meta(fenced_meta("running", 1))
        store.append(RUN, conf_entry(0))
        _meta_is(store, fenced_meta("running", 1), "after an unleased put_meta")
        _seqs_are(store, [0], "after an unleased append")
        store.delete(RUN)
        _seqs_are(store, [], "after an unleased delete")
        _meta_is(store, None, "after an unleased delete")


def fenced_writes_conformance(mk: Mk) -> ConformanceSuite:
    """Build the fenced-writes suite over ``mk`` (fresh isolated declaring stores)."""
    return _suite(each_fresh(mk))


def fenced_writes_suite(certification: Certification) -> ConformanceSuite:
    """Build the fenced-writes suite over the certification's fresh locations."""
    return _suite(partial(fresh_leasable, certification, CERTIFY_TTL_MS))


def _suite(stores: Fresh[LeasableStore]) -> ConformanceSuite:
    table: list[tuple[str, str, tuple[str, ...], Callable[[Fresh[LeasableStore]], None]]] = [
        ("fenced-marker-declared", "the store declares fenced_writes = True",
         ("F5",), _marker_declared),
        ("fenced-meta-stale-rejected", "a superseded owner's put_meta is refused",
         ("F1", "F3", "F6", "L6"), _meta_stale_rejected),
        ("fenced-delete-stale-rejected", "a superseded owner's delete is refused",
         ("F1", "F3", "M6", "L6"), _delete_stale_rejected),
        ("fenced-tombstone-zombie-rejected", "a deleted incarnation cannot write",
         ("F1", "F3", "L5"), _tombstone_zombie_rejected),
        ("fenced-run-match", "a lease guards only the run it names",
         ("F2", "F3"), _run_match),
        ("fenced-unleased-passthrough", "calls without a lease stay single-writer",
         ("F4", "M6"), _unleased_passthrough),
    ]  # fmt: skip
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, stores))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("fenced-writes", checks)


SPEC: Final = SuiteSpec(
    "fenced-writes",
    fenced_writes_suite,
    "fenced_writes",
    True,
    "fenced meta writes and deletes (8.5)",
)
