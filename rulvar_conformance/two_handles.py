"""``two_handles_conformance(locations, capabilities)``: one location, two handles.

Every check opens two (or three) handles on ONE fresh location
(``at_fresh_location(..., needs=("shared",))``), so what a single instance hides
behind its own lock shows up: lease exclusivity and the seq guard across
handles (L1, L2, J6), epochs never issued twice by two handles, also across
delete and expiry (L3-L5), takeover by the second handle fencing the first on
every surface (L6, F1-F3, X4), the X1 and X2 pitfalls of CONTRACT section 13,
and X7's shared-instance threads. Visibility is always checked through a handle
other than the one that wrote. Expiry comes from an injected ``ManualClock``
shared by the handles (needs ``clock``); without one a lease goes stale by
release and re-acquire, and the clock checks are not run, with the reason.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Final

from rulvar_conformance._failpause import fast_switching
from rulvar_conformance._kit import (
    ConformanceSuite,
    attempt,
    build_check,
    require,
    run_concurrently,
)
from rulvar_conformance._site import ManualClock, at_fresh_location
from rulvar_conformance._surfaces import (
    blob_ref,
    entry,
    expect_refused,
    leasable,
    meta,
    prepare,
    require_capability,
    stale_everywhere,
)
from rulvar_store import (
    JournalOrderViolation,
    LeasableStore,
    Lease,
    LeaseHeldError,
    OpenedStore,
    RunFilter,
    read_run_meta,
)
from rulvar_store._locations import LocationFactory

__all__ = ["TEST_TTL_MS", "two_handles_conformance"]

TEST_TTL_MS: Final = 100
"""Lease ttl under the injected clock (CONTRACT 13 uses 100): test time, not real."""

RUN: Final = "two-handles-run"
ROUNDS: Final = 12
CYCLES_PER_HANDLE: Final = 20
EPOCH_RACE_BUDGET_S: Final = 1.0
"""Each handle cycles at least CYCLES_PER_HANDLE leases, and on until the budget."""
LOCKSTEP_SEQS: Final = 1000
LOCKSTEP_BUDGET_S: Final = 1.0
"""The lockstep race stops at LOCKSTEP_SEQS seqs or after LOCKSTEP_BUDGET_S."""
X7_THREADS: Final = 8
X7_APPENDS: Final = 50

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


def _epochs_concurrent(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        handles = [leasable(site.open()), leasable(site.open())]
        observer = leasable(site.open())

        deadline = time.monotonic() + EPOCH_RACE_BUDGET_S
        # Who holds the run, as the handles report it: set right after a granted
        # acquire, cleared right before the release, so honest stores never
        # find it taken (the next grant can only follow the release).
        holding = threading.Lock()
        holder: list[int | None] = [None]
        overlaps: list[tuple[int, int]] = []

        def cycles(index: int) -> list[int]:
            store, epochs = handles[index], list[int]()
            while len(epochs) < CYCLES_PER_HANDLE or time.monotonic() < deadline:
                taken = attempt(lambda: store.acquire(RUN, f"owner-{index}"))
                if taken.error is not None:
                    require(
                        isinstance(taken.error, LeaseHeldError),
                        f"expected acquire to win or raise LeaseHeldError, "
                        f"observed {taken.error!r}",
                    )
                    continue
                assert taken.value is not None
                epochs.append(taken.value.epoch)
                with holding:
                    if holder[0] is not None:
                        overlaps.append((index, taken.value.epoch))
                    holder[0] = index
                kept = attempt(partial(store.renew, taken.value))
                with holding:
                    holder[0] = None
                let_go = attempt(partial(store.release, taken.value))
                require(
                    kept.ok and let_go.ok,
                    f"handle {index}: expected renew and release of its own live "
                    f"lease to succeed, observed {kept.error or let_go.error!r} "
                    "(the other handle took a live lease: L1, L2)",
                )
            return epochs

        with fast_switching():
            outcomes = run_concurrently([lambda: cycles(0), lambda: cycles(1)])
        lists: list[list[int]] = []
        for index, outcome in enumerate(outcomes):
            require(outcome.ok, f"handle {index} failed its cycles: {outcome.error}")
        require(
            not overlaps,
            f"expected one holder at a time, observed a handle granted the lease "
            f"while the other still held it {len(overlaps)} times (first: handle "
            f"{overlaps[0][0] if overlaps else 0} at epoch "
            f"{overlaps[0][1] if overlaps else 0}; L1, L2)",
        )
        for index, outcome in enumerate(outcomes):
            assert outcome.value is not None
            lists.append(outcome.value)
            drops = [
                (number, before, after)
                for number, (before, after) in enumerate(
                    zip(outcome.value, outcome.value[1:], strict=False), start=2
                )
                if after <= before
            ]
            require(
                not drops,
                f"handle {index}: expected strictly increasing epochs, observed "
                f"grant {drops[0][0] if drops else 0} at epoch "
                f"{drops[0][2] if drops else 0} after {drops[0][1] if drops else 0} "
                f"({len(drops)} such drops in {len(outcome.value)} grants; L2, L3)",
            )
        every = lists[0] + lists[1]
        twice = sorted(set(lists[0]) & set(lists[1]))
        require(
            not twice,
            f"expected every epoch granted once, observed epochs {twice[:10]} granted to "
            f"both handles (L2, L3)",
        )
        last = observer.acquire(RUN, "owner-last")
        require(
            last.epoch > max(every),
            f"expected a later acquire above every granted epoch ({max(every)}), "
            f"observed {last.epoch}",
        )


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


def _seq_guard_race(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a, b, observer = site.open(), site.open(), site.open()
        with fast_switching():
            for seq in range(ROUNDS):
                outcomes = run_concurrently(
                    [
                        lambda s=seq: a.journal.append(RUN, entry(s, "a", s)),  # type: ignore[misc]
                        lambda s=seq: b.journal.append(RUN, entry(s, "b", s)),  # type: ignore[misc]
                    ]
                )
                won = [o for o in outcomes if o.ok]
                lost = [o.error for o in outcomes if not o.ok]
                require(
                    len(won) == 1
                    and all(isinstance(e, JournalOrderViolation) for e in lost),
                    f"seq {seq} appended through two handles at once: expected one "
                    f"success and one JournalOrderViolation, observed "
                    f"{[o.error or 'ok' for o in outcomes]} (J6)",
                )
        seqs = [item.get("seq") for item in observer.journal.load(RUN)]
        require(
            seqs == list(range(ROUNDS)),
            f"expected seqs {list(range(ROUNDS))} once each through a third handle, "
            f"observed {seqs} (J6, J2)",
        )
        _seq_lockstep(a, b, observer)


def _seq_lockstep(a: OpenedStore, b: OpenedStore, observer: OpenedStore) -> None:
    """Both handles append the same seqs in order as fast as they can, again and again.

    The one that falls behind skips ahead on JournalOrderViolation, so the two
    soon race for the same seq again and again; a guard checked apart from its
    insert lets both land. Races repeat on fresh runs until the time budget is
    spent, so a narrow window is still hit with high probability.
    """
    deadline = time.monotonic() + LOCKSTEP_BUDGET_S

    def climb(handle: OpenedStore, run_id: str, by: str) -> int:
        landed = 0
        for seq in range(LOCKSTEP_SEQS):
            if time.monotonic() > deadline:
                break
            done = attempt(partial(handle.journal.append, run_id, entry(seq, by, seq)))
            if done.ok:
                landed += 1
            else:
                require(
                    isinstance(done.error, JournalOrderViolation),
                    f"expected append of seq {seq} to land or raise "
                    f"JournalOrderViolation, observed {done.error!r}",
                )
        return landed

    race = 0
    while race == 0 or time.monotonic() < deadline:
        run_id = f"{RUN}-lockstep-{race}"
        race += 1
        with fast_switching():
            outcomes = run_concurrently(
                [partial(climb, a, run_id, "a"), partial(climb, b, run_id, "b")]
            )
        landed = 0
        for outcome in outcomes:
            require(outcome.ok, f"a lockstep appender failed: {outcome.error!r}")
            landed += outcome.value or 0
        seqs = [int(item["seq"]) for item in observer.journal.load(run_id)]
        twice = sorted(seq for seq, n in Counter(seqs).items() if n > 1)
        require(
            not twice and seqs == sorted(seqs) and len(seqs) == landed,
            f"two handles appending the same seqs in lockstep: expected each seq "
            f"stored once, in order, one entry per successful append ({landed}), "
            f"observed {len(seqs)} entries, seqs stored twice: {twice[:10]} (J6)",
        )


def _x7_shared_instance(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        shared, observer = leasable(site.open()), site.open()

        def worker(index: int) -> None:
            run_id = f"{RUN}-x7-{index}"
            lease = shared.acquire(run_id, f"thread-{index}")
            for seq in range(X7_APPENDS):
                shared.append(run_id, entry(seq, "t", seq), lease)
                if seq % 10 == 9:
                    shared.renew(lease)
            shared.release(lease)

        outcomes = run_concurrently(
            [partial(worker, index) for index in range(X7_THREADS)]
        )
        errors = [o.error for o in outcomes if not o.ok]
        require(
            not errors,
            f"expected {X7_THREADS} threads sharing one instance to finish cleanly, "
            f"observed {errors[:3]} (X7, Q9)",
        )
        for index in range(X7_THREADS):
            seqs = [
                item.get("seq") for item in observer.journal.load(f"{RUN}-x7-{index}")
            ]
            require(
                seqs == list(range(X7_APPENDS)),
                f"thread {index}: expected seqs 0..{X7_APPENDS - 1} in order through "
                f"another handle, observed {seqs[:8]}... ({len(seqs)} entries)",
            )


def two_handles_conformance(
    locations: LocationFactory, capabilities: frozenset[str]
) -> ConformanceSuite:
    """Build the two-handles suite over fresh shared locations (CONTRACT 3, 4, 13)."""
    table: list[tuple[str, str, tuple[str, ...], Body]] = [
        ("two-handles-exclusive-acquire",
         "concurrent acquires through two handles: exactly one wins",
         ("L1", "L2", "P4"), _exclusive_acquire),
        ("two-handles-epochs-interleaved",
         "epochs rise across handles, release and delete",
         ("L3", "L4", "L5", "M6"), _epochs_interleaved),
        ("two-handles-epochs-concurrent",
         "two handles cycling leases never hold at once nor share an epoch",
         ("L1", "L2", "L3"), _epochs_concurrent),
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
         ("J6", "J2", "Q7"), _seq_guard_race),
        ("x7-shared-instance-threads",
         "8 threads on one instance: fenced appends and renews, complete journals",
         ("X7", "Q9"), _x7_shared_instance),
    ]  # fmt: skip
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, locations, capabilities))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("two-handles", checks)
