"""Races queued behind a paused takeover, append or acquire (forced_races, X3).

The paused party holds its transaction open at its ``before-commit`` failpoint;
the other party starts its call, which an honest store makes wait for the lock.
A store that checks the lease, the seq or the free run BEFORE its transaction
decides on state that is about to change, and lets a stale write, a duplicate
seq or a second lease through.
"""

from __future__ import annotations

from functools import partial

from rulvar_conformance.harness.failpause import Background, FailpointPause, installed
from rulvar_conformance.harness.kit import attempt, require
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import (
    Surface,
    entry,
    expect_refused,
    leasable,
    prepare,
    state_of,
)
from rulvar_conformance.suites._windows import (
    QUEUE_S,
    WINDOW_TAG,
    WINDOW_TTL_MS,
    Handles,
    await_pause,
    dry_hits,
    open_handles,
    require_failpoints,
    successor_holds,
)
from rulvar_store import JournalOrderViolation, LeaseHeldError
from rulvar_store.backend import LocationFactory

__all__ = [
    "queued_acquire_race",
    "queued_behind_takeover",
    "queued_epoch_race",
    "queued_seq_race",
]

Caps = frozenset[str]


def queued_behind_takeover(
    h: Handles, caps: Caps, surface: Surface, run_id: str
) -> None:
    """Pause the takeover before its commit while the old holder writes."""
    probe = f"{run_id}-probe"
    hits = dry_hits(partial(leasable(h.b).acquire, probe, "prober"), "an acquire")
    require(
        ("acquire", "before-commit") in hits,
        f"expected acquire to call failpoint ('acquire', 'before-commit'), observed {hits}",
    )
    stale = leasable(h.a).acquire(run_id, "owner-a")
    prepare(h.a, stale, caps)
    h.clock.advance(
        WINDOW_TTL_MS + 50
    )  # expired for the world; the writer's clock lags
    before = state_of(h.c, run_id, caps)
    pause = FailpointPause(hits.index(("acquire", "before-commit")))
    with installed(pause.hook):
        taker = Background(
            partial(leasable(h.b).acquire, run_id, "owner-b"), before=pause.aim
        ).start()
        try:
            await_pause(pause, taker, "the other handle's acquire")
            writer = Background(partial(surface.write, h.a, stale, WINDOW_TAG)).start()
            writer.wait(QUEUE_S)
            queued = not writer.done
        finally:
            pause.release()
        require(taker.wait(30) and writer.wait(30), "a call never finished")
    require(
        taker.outcome.ok,
        f"expected the takeover of an expired lease to succeed, observed "
        f"{taker.outcome.error!r}",
    )
    successor = taker.outcome.value
    assert successor is not None
    if queued:
        expect_refused(
            writer.outcome,
            f"the old holder's {surface.name} that waited for another handle's "
            "takeover to commit",
        )
        after = state_of(h.c, run_id, caps)
        require(
            after.same_as(before),
            f"expected the run unchanged by the refused {surface.name}, observed "
            f"{before} became {after}: the lease was checked before the write "
            "transaction (L7, X3)",
        )
    successor_holds(h, run_id, successor, f"after a queued stale {surface.name}")


def queued_seq_race(locations: LocationFactory, caps: Caps) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        require_failpoints(h)
        run_id = "queued-seq"
        h.c.journal.append(run_id, entry(0, "c", 0))
        hits = dry_hits(
            partial(h.b.journal.append, "probe-seq", entry(0, "b", 0)),
            "append",
        )
        pause = FailpointPause(hits.index(("append", "before-commit")))
        with installed(pause.hook):
            first = Background(
                partial(h.b.journal.append, run_id, entry(1, "b", 1)), before=pause.aim
            ).start()
            try:
                await_pause(pause, first, "an append of seq 1")
                second = Background(
                    partial(h.a.journal.append, run_id, entry(1, "a", 1))
                )
                second.start()
                second.wait(QUEUE_S)
            finally:
                pause.release()
            require(first.wait(30) and second.wait(30), "an append never finished")
        outcomes = [first.outcome, second.outcome]
        require(
            sum(o.ok for o in outcomes) == 1
            and all(
                o.ok or isinstance(o.error, JournalOrderViolation) for o in outcomes
            ),
            f"expected one of two appends of seq 1 through two handles to persist and "
            f"the other to raise JournalOrderViolation, observed "
            f"{[o.error or 'ok' for o in outcomes]}: the seq guard is not checked in "
            "the write transaction (J6)",
        )
        seqs = [item.get("seq") for item in h.c.journal.load(run_id)]
        require(
            seqs == [0, 1],
            f"expected seqs [0, 1] through a third handle, observed {seqs} (J6)",
        )


def queued_epoch_race(locations: LocationFactory, caps: Caps) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        require_failpoints(h)
        hits = dry_hits(
            partial(leasable(h.b).acquire, "probe-epoch", "prober"), "acquire"
        )
        index = hits.index(("acquire", "before-commit"))
        for round_no in range(3):
            run_id = f"queued-epoch-{round_no}"

            def cycle(run_id: str = run_id) -> int:
                lease = leasable(h.b).acquire(run_id, "owner-b")
                leasable(h.b).release(lease)
                return lease.epoch

            pause = FailpointPause(index)
            with installed(pause.hook):
                first = Background(cycle, before=pause.aim).start()
                try:
                    await_pause(pause, first, "the other handle's acquire")
                    second = Background(
                        partial(leasable(h.a).acquire, run_id, "owner-a")
                    )
                    second.start()
                    second.wait(QUEUE_S)
                finally:
                    pause.release()
                require(first.wait(30) and second.wait(30), "an acquire never finished")
            require(
                first.outcome.ok, f"acquire and release failed: {first.outcome.error!r}"
            )
            b_epoch = first.outcome.value
            late = second.outcome
            if late.ok and late.value is not None:
                require(
                    b_epoch is not None and late.value.epoch > b_epoch,
                    f"expected an acquire queued behind another handle's acquire and "
                    f"release to get an epoch above {b_epoch}, observed "
                    f"{late.value.epoch}: the epoch was read outside the acquire's "
                    "transaction (L2, L3)",
                )
            else:
                require(
                    isinstance(late.error, LeaseHeldError),
                    f"expected the queued acquire to win or raise LeaseHeldError, "
                    f"observed {late.error!r}",
                )


def queued_acquire_race(locations: LocationFactory, caps: Caps) -> None:
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        require_failpoints(h)
        hits = dry_hits(
            partial(leasable(h.b).acquire, "probe-acquire", "prober"),
            "acquire",
        )
        run_id = "queued-acquire"
        pause = FailpointPause(hits.index(("acquire", "before-commit")))
        with installed(pause.hook):
            first = Background(
                partial(leasable(h.b).acquire, run_id, "owner-b"), before=pause.aim
            ).start()
            try:
                await_pause(pause, first, "the other handle's acquire")
                second = Background(partial(leasable(h.a).acquire, run_id, "owner-a"))
                second.start()
                queued = not second.wait(QUEUE_S)
            finally:
                pause.release()
            require(first.wait(30) and second.wait(30), "an acquire never finished")
        require(first.outcome.ok, f"the first acquire failed: {first.outcome.error!r}")
        winner = first.outcome.value
        assert winner is not None
        if queued:
            expect_refused(
                second.outcome,
                "an acquire queued behind another handle's acquire of the same run "
                "(it must find the run leased: L1, L2)",
            )
        if second.outcome.ok:  # it ran entirely before the first committed
            require(
                False,
                "expected one of two acquires of a free run to win, observed both "
                f"granted: {winner} and {second.outcome.value} (L1, L2)",
            )
        leasable(h.b).renew(winner)
        intruder = attempt(partial(leasable(h.c).acquire, run_id, "owner-c"))
        expect_refused(intruder, "a third acquire while the winner holds the run")
