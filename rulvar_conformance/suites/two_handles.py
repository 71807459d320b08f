"""``two_handles_conformance(certification)``: one location, two handles.

Every check opens two (or three) handles on ONE fresh location
(``at_fresh_location(..., needs=("shared",))``), so what a single instance hides
behind its own lock shows up: lease exclusivity and the seq guard across
handles (L1, L2, J6), epochs never issued twice by two handles, also across
delete and expiry (L3-L5), takeover by the second handle fencing the first on
every surface (L6, F1-F3, X4), the X1 and X2 pitfalls of CONTRACT section 13,
X7's shared-instance threads, and one handle in a spawned child process
(needs ``processes``). Visibility is always checked through a handle
other than the one that wrote. Expiry comes from an injected ``ManualClock``
shared by the handles (needs ``clock``); without one a lease goes stale by
release and re-acquire, and the clock checks are not run, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    require,
    run_concurrently,
)
from rulvar_conformance.harness.site import ManualClock, at_fresh_location
from rulvar_conformance.harness.surfaces import (
    blob_ref,
    entry,
    expect_refused,
    leasable,
    meta,
    prepare,
    require_capability,
    stale_everywhere,
)
from rulvar_conformance.suites._batch_handles import batch_seen_whole
from rulvar_conformance.suites._handle_races import (
    epochs_concurrent,
    seq_guard_race,
    x7_shared_instance,
)
from rulvar_conformance.suites._process_handles import across_processes
from rulvar_store import (
    LeasableStore,
    Lease,
    LeaseHeldError,
    OpenedStore,
    RunFilter,
    read_run_meta,
)
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "TEST_TTL_MS", "two_handles_conformance"]

TEST_TTL_MS: Final = 100
"""Lease ttl under the injected clock (CONTRACT 13 uses 100): test time, not real."""

RUN: Final = "two-handles-run"
ROUNDS: Final = 12

Body = Callable[[LocationFactory, frozenset[str]], None]


def _exclusive_acquire(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a, b = leasable(site.open()), leasable(site.open())
        for round_no in range(ROUNDS):
            run_id = f"{RUN}-{round_no}"
            first, second = run_concurrently(
                [
                    partial(a.acquire, run_id, "owner-a"),
                    partial(b.acquire, run_id, "owner-b"),
                ]
            )
            winners = [o.value for o in (first, second) if o.ok]
            require(
                len(winners) == 1,
                f"round {round_no}: expected exactly one of two concurrent acquires "
                f"through two handles to win, observed {len(winners)} ({first}, {second})",
            )
            loser = second if first.ok else first
            require(
                isinstance(loser.error, LeaseHeldError),
                f"round {round_no}: expected the losing acquire to raise "
                f"LeaseHeldError, observed {loser.error!r}",
            )
            winner = winners[0]
            assert winner is not None
            other = b if winner.owner == "owner-a" else a
            again = attempt(partial(other.acquire, run_id, "owner-c"))
            expect_refused(again, "acquire through the other handle of a live lease")


def _epochs_interleaved(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a, b = leasable(site.open()), leasable(site.open())
        granted: list[int] = []

        def cycle(store: LeasableStore, owner: str, note: str) -> None:
            lease = store.acquire(RUN, owner)
            require(
                not granted or lease.epoch > granted[-1],
                f"{note}: expected an epoch above {granted[-1] if granted else 0}, "
                f"observed {lease.epoch} (epochs granted so far: {granted})",
            )
            granted.append(lease.epoch)
            store.release(lease)

        for turn in range(6):
            cycle(a if turn % 2 == 0 else b, "owner-stable", f"acquire {turn + 1}")
        b.delete(RUN)  # unleased delete: the counter must survive it (L5, M6)
        cycle(a, "owner-stable", "acquire after an unleased delete by the other handle")
        lease = b.acquire(RUN, "owner-stable")
        require(
            lease.epoch > granted[-1],
            f"expected an epoch above {granted[-1]}, observed {lease.epoch}",
        )
        granted.append(lease.epoch)
        b.delete(RUN, lease)  # leased delete removes the lease row (M6)
        cycle(a, "owner-stable", "acquire after a leased delete by the other handle")


def _epochs_after_expiry(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        clock = ManualClock()
        a = leasable(site.open(TEST_TTL_MS, now=clock))
        b = leasable(site.open(TEST_TTL_MS, now=clock))
        first = a.acquire(RUN, "owner-stable")
        clock.advance(TEST_TTL_MS + 50)
        second = b.acquire(RUN, "owner-stable")
        require(
            second.epoch > first.epoch,
            f"expected the takeover after expiry to get an epoch above "
            f"{first.epoch}, observed {second.epoch} (L3, L4)",
        )
        expect_refused(attempt(lambda: a.renew(first)), "renew of the expired lease")
        clock.advance(TEST_TTL_MS + 50)
        third = a.acquire(RUN, "owner-stable")
        require(
            third.epoch > second.epoch,
            f"expected the second takeover after expiry to get an epoch above "
            f"{second.epoch}, observed {third.epoch}",
        )


def _takeover_after_release(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a, b = site.open(), site.open()
        stale = leasable(a).acquire(RUN, "owner-a")
        prepare(a, stale, caps, "a")
        leasable(a).release(stale)
        fresh = leasable(b).acquire(RUN, "owner-b")
        prepare_successor(b, fresh, caps)
        stale_everywhere(a, stale, b, caps, "released and taken over by another handle")
        intruder = attempt(lambda: leasable(a).acquire(RUN, "owner-c"))
        expect_refused(intruder, "a third owner's acquire while the successor is live")
        leasable(b).append(RUN, entry(2_000_000, "b", 2), fresh)
        seen = [item.get("key") for item in a.journal.load(RUN)]
        require(
            seen[-1:] == ["b-2"],
            f"expected the successor's append visible through the other handle, "
            f"observed keys {seen}",
        )


def prepare_successor(opened: OpenedStore, lease: Lease, caps: frozenset[str]) -> None:
    """The successor's own writes: an entry above the stale writer's, meta, blob."""
    opened.journal.append(RUN, entry(1, "b", 1), lease)
    if "fenced_writes" in caps:
        opened.journal.put_meta(meta(RUN, "b", 1), lease)
    if "fenced_transcripts" in caps:
        opened.transcripts.put(blob_ref(RUN), bytes([0x01, ord("b"), 1]), lease)


def _takeover_after_expiry(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        clock = ManualClock()
        a = site.open(TEST_TTL_MS, now=clock)
        b = site.open(TEST_TTL_MS, now=clock)
        stale = leasable(a).acquire(RUN, "owner-a")
        prepare(a, stale, caps, "a")
        taken_at = clock.advance(TEST_TTL_MS + 50)
        fresh = leasable(b).acquire(RUN, "owner-b")
        prepare_successor(b, fresh, caps)
        clock.advance(
            TEST_TTL_MS // 2
        )  # the successor is live; a stale renew would show
        stale_everywhere(a, stale, b, caps, "expired and taken over by another handle")
        clock.set(taken_at + TEST_TTL_MS - 10)
        intruder = attempt(lambda: leasable(a).acquire(RUN, "owner-c"))
        expect_refused(intruder, "a third owner's acquire before the successor expires")
        clock.set(taken_at + TEST_TTL_MS + 10)
        late = attempt(lambda: leasable(a).acquire(RUN, "owner-c"))
        require(
            late.ok,
            f"expected the successor's lease to expire one ttl after its acquire "
            f"(the refused stale renew must not extend it), observed {late.error!r}",
        )


def _x1_superseded_meta(locations: LocationFactory, caps: frozenset[str]) -> None:
    require_capability(caps, "fenced_writes")
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        clock = ManualClock()
        a = leasable(site.open(TEST_TTL_MS, now=clock))
        b = leasable(site.open(TEST_TTL_MS, now=clock))
        first = a.acquire(RUN, "segment-2")
        a.put_meta(meta(RUN, "seg", 2), first)
        clock.advance(150)
        second = b.acquire(RUN, "segment-3")
        b.put_meta(meta(RUN, "seg", 3), second)
        late = attempt(lambda: a.put_meta(meta(RUN, "seg", 2, "cancelled"), first))
        expect_refused(late, "the superseded segment's terminal put_meta (X1)")
        for name, handle in (("the successor's handle", b), ("the writer's handle", a)):
            seen = read_run_meta(handle, RUN)
            require(
                seen == meta(RUN, "seg", 3),
                f"expected meta running/3 through {name}, observed {seen!r} (X1)",
            )
        listed = b.list_runs(RunFilter(statuses=["running", "suspended"]))
        require(
            any(item.get("runId") == RUN for item in listed),
            f"expected list_runs(statuses=['running','suspended']) to include the "
            f"run, observed {[item.get('runId') for item in listed]} (X1, M4)",
        )


def _x2_stale_checkpoint(locations: LocationFactory, caps: frozenset[str]) -> None:
    require_capability(caps, "fenced_transcripts")
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        clock = ManualClock()
        a = site.open(TEST_TTL_MS, now=clock)
        b = site.open(TEST_TTL_MS, now=clock)
        ref = blob_ref(RUN)
        first = leasable(a).acquire(RUN, "segment-a")
        a.transcripts.put(ref, b"[1]", first)
        clock.advance(TEST_TTL_MS + 50)
        second = leasable(b).acquire(RUN, "segment-b")
        b.transcripts.put(ref, b"[3]", second)
        expect_refused(
            attempt(lambda: a.transcripts.put(ref, b"[2]", first)),
            "the stale checkpoint put (X2)",
        )
        expect_refused(
            attempt(lambda: a.transcripts.delete(ref, first)),
            "the stale checkpoint delete (X2, X4)",
        )
        for name, handle in (("the successor's handle", b), ("the stale handle", a)):
            seen = handle.transcripts.get(ref)
            require(
                seen == b"[3]",
                f"expected the checkpoint [3] through {name}, observed {seen!r} (X2)",
            )


def two_handles_conformance(certification: Certification) -> ConformanceSuite:
    """Build the two-handles suite over fresh shared locations (CONTRACT 3, 4, 13)."""
    locations, capabilities = certification.locations, certification.capabilities
    table: list[tuple[str, str, tuple[str, ...], Body]] = [
        ("two-handles-exclusive-acquire",
         "concurrent acquires through two handles: exactly one wins",
         ("L1", "L2"), _exclusive_acquire),
        ("two-handles-epochs-interleaved",
         "epochs rise across handles, release and delete",
         ("L3", "L4", "L5", "M6"), _epochs_interleaved),
        ("two-handles-epochs-concurrent",
         "two handles cycling leases never hold at once nor share an epoch",
         ("L1", "L2", "L3"), epochs_concurrent),
        ("two-handles-epochs-after-expiry",
         "a takeover after expiry gets a higher epoch",
         ("L1", "L3", "L4", "D8"), _epochs_after_expiry),
        ("two-handles-takeover-after-release",
         "a released lease is refused on every surface of another handle's run",
         ("L6", "F1", "F2", "F3", "T6", "X4"), _takeover_after_release),
        ("two-handles-takeover-after-expiry",
         "an expired, taken-over lease is refused everywhere; the successor's stays",
         ("L1", "L6", "L8", "F1", "F3", "T6", "X3", "X4"), _takeover_after_expiry),
        ("x1-superseded-terminal-meta",
         "a superseded segment's terminal put_meta is refused; the run stays listed",
         ("X1", "F6", "M4"), _x1_superseded_meta),
        ("x2-stale-checkpoint",
         "a stale checkpoint put or delete is refused; both handles read [3]",
         ("X2", "F2", "T6", "X4"), _x2_stale_checkpoint),
        ("two-handles-seq-guard-race",
         "the same seq appended through two handles at once persists once",
         ("J6", "J2"), seq_guard_race),
        ("two-handles-across-processes",
         "a lease taken in a spawned child holds for this process's handle",
         ("L1", "L3", "J3"), across_processes),
        ("two-handles-batch-seen-whole",
         "a second handle sees each put_many whole, and nothing of a refused one",
         ("T11", "F3", "L6"), batch_seen_whole),
        ("x7-shared-instance-threads",
         "8 threads on one instance: fenced appends and renews, complete journals",
         ("X7",), x7_shared_instance),
    ]  # fmt: skip
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, locations, capabilities))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("two-handles", checks)


SPEC: Final = SuiteSpec(
    "two-handles",
    two_handles_conformance,
    "leases",
    True,
    "two handles on one location: exclusivity, epochs, takeover, X1, X2, X7",
)
