"""``queued-writes``: a blob store's queued puts (Q19), where it offers them.

A store with ``queue_put``/``await_put``/``flush_queued`` (SQLite and
PostgreSQL) lets a write nobody waits on at once share the commit of the next
write. Each check queues with a long linger, so a queued put that is not carried
stays visibly unlanded for the whole check: what the check sees is the store's
doing, never a race with the linger running out. A put queued while the store
still finishes its previous batch in the background (an asyncio SQLite store's
worker thread hands over after waking the caller) joins the next batch at once,
which is allowed and tests nothing; so each check reads through the store before
it queues (answered once that batch is over) and then sees its put unlanded, or
awaits it and queues another, up to ``LINGER_TRIES`` times; a store none of
whose puts lingers fails.

- the next put under the same lease carries the queued one: both readable once
  that put returns, and ``await_put`` reports it was accompanied;
- a queued put keeps its order: the later put of the same ref wins;
- ``flush_queued`` lands a lingering put at once, before anyone awaits it;
- ``await_put`` returns only once the put is landed, never before;
- a put queued under a superseded lease is refused at ``await_put`` (F2, L6)
  and changes nothing.

The suite runs for stores with fenced blobs; one without ``queue_put`` has
nothing to check here, and every check is reported not run (a promise only some
backends make).
"""

from __future__ import annotations

from collections.abc import Callable
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
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_store import LeasableStore, Lease, LeaseHeldError, OpenedStore
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "queued_writes_conformance"]

RUN: Final = "queued-run"
# Far longer than any check takes: a put nobody carried is still queued when
# the check looks, whatever the machine's load.
LINGER_S: Final = 30.0
# Long enough for a successor's acquire to be the one live lease throughout.
TTL_MS: Final = 60_000
# Queued puts tried until one is seen lingering (the module docstring).
LINGER_TRIES: Final = 5

Body = Callable[[Any, Any, Lease], None]


def _queued_surface(opened: OpenedStore) -> tuple[Any, Any]:
    """The store's blob twin and journal; not run without queued puts or leases."""
    blobs: Any = opened.transcripts
    if not all(
        callable(getattr(blobs, name, None))
        for name in ("queue_put", "await_put", "flush_queued")
    ):
        not_run("the blob store offers no queued puts (queue_put, await_put)")
    journal: Any = opened.journal
    if not isinstance(journal, LeasableStore):
        not_run("the store has no leases to queue puts under")
    return blobs, journal


def _at_fresh_store(locations: LocationFactory, body: Body) -> None:
    with at_fresh_location(locations) as site:
        blobs, journal = _queued_surface(site.open(TTL_MS))
        lease = journal.acquire(RUN, "queued-owner")
        try:
            body(blobs, journal, lease)
        finally:
            # A queued put left behind by a failed check must not outlive it.
            blobs.flush_queued()


def _lingering(
    blobs: Any, lease: Lease, name: str, blob: bytes, linger_s: float = LINGER_S
) -> tuple[str, Any]:
    """Queue a put that lingers, seen unlanded once queued: its ref and handle.

    A put the store carried at once anyway is awaited and another queued (the
    module docstring); a store whose every queued put lands at once shares no
    COMMIT with the next write and fails (Q19).
    """
    for tried in range(LINGER_TRIES):
        ref = f"{RUN}/{name}-{tried}"
        # A read first: a store that ends its last batch in the background (an
        # asyncio store's worker thread) answers it once that batch is over, so
        # the put queued next lingers instead of joining a batch in flight.
        blobs.get(ref)
        queued = blobs.queue_put(ref, blob, lease, linger_s=linger_s)
        lingers = blobs.get(ref) is None
        if lingers:
            break
        blobs.await_put(queued)
    require(
        lingers,
        f"each of {LINGER_TRIES} queued puts (linger {linger_s} s) was readable as "
        "soon as queue_put returned: a queued put must wait for the next write "
        "to share its COMMIT (Q19)",
    )
    return ref, queued


def _rides_next_put(blobs: Any, journal: Any, lease: Lease) -> None:
    ref, queued = _lingering(blobs, lease, "queued", b"queued")
    blobs.put(f"{RUN}/carrier", b"carrier", lease)
    require(
        blobs.get(ref) == b"queued",
        "the put that followed a queued put under the same lease returned, but the "
        "queued put is not readable: the following put did not carry it (Q19)",
    )
    accompanied = blobs.await_put(queued)
    require(
        accompanied is True,
        f"await_put returned {accompanied!r} for a queued put that the next put "
        "carried: it must report True, so a caller knows its writes found company",
    )


def _keeps_order(blobs: Any, journal: Any, lease: Lease) -> None:
    ref, queued = _lingering(blobs, lease, "twice", b"first, queued")
    blobs.put(ref, b"second, put", lease)
    blobs.await_put(queued)
    stored = blobs.get(ref)
    require(
        stored == b"second, put",
        f"a ref queued, then put again, holds {stored!r}: the queued put landed "
        "after the later put of the same ref (Q19 order)",
    )


def _flush_lands_now(blobs: Any, journal: Any, lease: Lease) -> None:
    ref, queued = _lingering(blobs, lease, "flushed", b"flushed")
    blobs.flush_queued()
    require(
        blobs.get(ref) == b"flushed",
        "flush_queued returned, but the queued put is not readable: a reader "
        "that must see it would miss it (Q19)",
    )
    blobs.await_put(queued)


def _awaited_is_landed(blobs: Any, journal: Any, lease: Lease) -> None:
    ref, queued = _lingering(blobs, lease, "awaited", b"awaited", linger_s=1.0)
    outcome = attempt(partial(blobs.await_put, queued))
    require(outcome.error is None, f"await_put of a lone queued put raised {outcome}")
    require(
        blobs.get(ref) == b"awaited",
        "await_put returned, but the queued put is not readable: it was "
        "acknowledged before it landed (Q19)",
    )


def _superseded_refused(blobs: Any, journal: Any, lease: Lease) -> None:
    ref = f"{RUN}/stale"
    blobs.put(ref, b"before", lease)
    journal.release(lease)
    successor = journal.acquire(RUN, "successor")
    queued = blobs.queue_put(ref, b"stale", lease, linger_s=LINGER_S)
    blobs.put(f"{RUN}/successor", b"successor", successor)
    blobs.flush_queued()
    outcome = attempt(partial(blobs.await_put, queued))
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"a put queued under a superseded lease gave {outcome} at await_put, not "
        "LeaseHeldError (F2)",
    )
    stored = blobs.get(ref)
    require(
        stored == b"before",
        f"a put queued under a superseded lease changed the blob to {stored!r} (L6)",
    )


CHECKS: Final = (
    (
        "queued-rides-next-put",
        "a queued put is carried by the next put under its lease",
        _rides_next_put,
    ),
    (
        "queued-keeps-order",
        "a queued put, then a put of the same ref: the later one wins",
        _keeps_order,
    ),
    (
        "queued-flush-lands-now",
        "flush_queued lands a lingering queued put before anyone awaits it",
        _flush_lands_now,
    ),
    (
        "queued-awaited-is-landed",
        "await_put returns only once the queued put is readable",
        _awaited_is_landed,
    ),
    (
        "queued-superseded-refused",
        "a put queued under a superseded lease is refused and changes nothing",
        _superseded_refused,
    ),
)


def queued_writes_conformance(certification: Certification) -> ConformanceSuite:
    """The Q19 checks over fresh locations."""
    return ConformanceSuite(
        "queued-writes",
        tuple(
            build_check(
                check_id,
                title,
                ("Q19",) if check_id != "queued-superseded-refused" else ("Q19", "F2"),
                partial(_at_fresh_store, certification.locations, body),
            )
            for check_id, title, body in CHECKS
        ),
    )


SPEC: Final = SuiteSpec(
    "queued-writes",
    queued_writes_conformance,
    "fenced_transcripts",
    True,
    "queued blob puts (queue_put): carried by the next put, in order, landed "
    "when flushed or awaited, fenced (Q19)",
)
