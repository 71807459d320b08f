"""The racing checks of the two-handles suite: many calls at once, real threads.

Two or more handles on one location race acquires, releases and appends of the
same seq for a bounded number of rounds or a time budget, under a fast thread
switch interval, so a check-then-act gap a store leaves between a read and its
write is hit with high probability. X7's threads share ONE instance instead.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from functools import partial
from itertools import pairwise
from typing import Final

from rulvar_conformance.harness.failpause import fast_switching
from rulvar_conformance.harness.kit import attempt, require, run_concurrently
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import entry, leasable
from rulvar_store import JournalOrderViolation, LeaseHeldError, OpenedStore
from rulvar_store.backend import LocationFactory

__all__ = ["epochs_concurrent", "seq_guard_race", "x7_shared_instance"]

RUN: Final = "two-handles-run"
ROUNDS: Final = 12
CYCLES_PER_HANDLE: Final = 20
EPOCH_HANDLES: Final = 3
EPOCH_RACE_BUDGET_S: Final = 0.8
"""Each handle cycles at least CYCLES_PER_HANDLE leases, and on until the budget."""
LOCKSTEP_SEQS: Final = 1000
LOCKSTEP_BUDGET_S: Final = 0.8
"""The lockstep race stops at LOCKSTEP_SEQS seqs or after LOCKSTEP_BUDGET_S."""
X7_THREADS: Final = 8
X7_APPENDS: Final = 50


def epochs_concurrent(locations: LocationFactory, caps: frozenset[str]) -> None:
    """EPOCH_HANDLES handles cycle acquire/release of one run as fast as they can.

    Each grant must be exclusive (the handle's release of it succeeds and no
    other handle reported holding the run at that moment) and carry an epoch no
    other grant got, rising per handle, below a later acquire's.
    """
    with at_fresh_location(locations, needs=("shared",)) as site:
        handles = [leasable(site.open()) for _ in range(EPOCH_HANDLES)]
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
                taken = attempt(partial(store.acquire, RUN, f"owner-{index}"))
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
                with holding:
                    holder[0] = None
                let_go = attempt(partial(store.release, taken.value))
                require(
                    let_go.ok,
                    f"handle {index}: expected the release of its own live lease "
                    f"(epoch {taken.value.epoch}) to succeed, observed "
                    f"{let_go.error!r} (another handle took a live lease: L1, L2)",
                )
            return epochs

        with fast_switching():
            outcomes = run_concurrently(
                [partial(cycles, index) for index in range(EPOCH_HANDLES)]
            )
        for index, outcome in enumerate(outcomes):
            require(outcome.ok, f"handle {index} failed its cycles: {outcome.error}")
        require(
            not overlaps,
            f"expected one holder at a time, observed a handle granted the lease "
            f"while another still held it {len(overlaps)} times (first: handle "
            f"{overlaps[0][0] if overlaps else 0} at epoch "
            f"{overlaps[0][1] if overlaps else 0}; L1, L2)",
        )
        lists = [outcome.value or [] for outcome in outcomes]
        for index, epochs in enumerate(lists):
            drops = [
                (number, before, after)
                for number, (before, after) in enumerate(pairwise(epochs), start=2)
                if after <= before
            ]
            require(
                not drops,
                f"handle {index}: expected strictly increasing epochs, observed "
                f"grant {drops[0][0] if drops else 0} at epoch "
                f"{drops[0][2] if drops else 0} after {drops[0][1] if drops else 0} "
                f"({len(drops)} such drops in {len(epochs)} grants; L2, L3)",
            )
        every = [epoch for epochs in lists for epoch in epochs]
        twice = sorted(epoch for epoch, n in Counter(every).items() if n > 1)
        require(
            not twice,
            f"expected every epoch granted once, observed {len(twice)} epochs "
            f"granted twice, first {twice[:10]} (L2, L3)",
        )
        last = observer.acquire(RUN, "owner-last")
        require(
            last.epoch > max(every),
            f"expected a later acquire above every granted epoch ({max(every)}), "
            f"observed {last.epoch}",
        )


def seq_guard_race(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a, b, observer = site.open(), site.open(), site.open()
        with fast_switching():
            for seq in range(ROUNDS):
                outcomes = run_concurrently(
                    [
                        partial(a.journal.append, RUN, entry(seq, "a", seq)),
                        partial(b.journal.append, RUN, entry(seq, "b", seq)),
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
        _seq_lockstep([a, b, site.open()], observer)


def _seq_lockstep(climbers: list[OpenedStore], observer: OpenedStore) -> None:
    """Several handles append the same seqs in order as fast as they can, again and again.

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
                [
                    partial(climb, handle, run_id, f"h{index}")
                    for index, handle in enumerate(climbers)
                ]
            )
        landed = 0
        for outcome in outcomes:
            require(outcome.ok, f"a lockstep appender failed: {outcome.error!r}")
            landed += outcome.value or 0
        seqs = [int(item["seq"]) for item in observer.journal.load(run_id)]
        twice = sorted(seq for seq, n in Counter(seqs).items() if n > 1)
        require(
            not twice and seqs == sorted(seqs) and len(seqs) == landed,
            f"{len(climbers)} handles appending the same seqs in lockstep: expected each seq "
            f"stored once, in order, one entry per successful append ({landed}), "
            f"observed {len(seqs)} entries, seqs stored twice: {twice[:10]} (J6)",
        )


def x7_shared_instance(locations: LocationFactory, caps: frozenset[str]) -> None:
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
