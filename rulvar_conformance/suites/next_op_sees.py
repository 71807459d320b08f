"""``next_op_sees_conformance(locations)``: no state outlives the operation that read it (X9).

A store may read a run's lease row, epoch, seq tail or meta once and reuse it:
per handle, per pooled session, or per group-commit batch. Every such copy goes
stale the moment another caller releases, deletes or takes over the run, and
the contract allows no window: the very next operation, whoever makes it,
sees the change. The other suites rarely put a batch-mate's release in front
of a write of the same batch, so a group commit that reads each run's lease
row once per batch passes them all. Each check here makes one caller's
operation (the first) change the run and a second caller's operation follow
it, three ways:

1. **In one batch, forced.** Where the store has failpoints, the first caller
   (a thread of handle ``a``) is held at its ``after-fence-check``, inside its
   transaction; a second thread of the SAME handle then calls, and is given a
   moment to queue behind it. A store that batches carries the second
   operation in the first one's transaction (the log of failpoint hits shows
   it: the second's ``after-begin`` falls after the first resumed and before
   its ``before-commit``); then the second must see the first's effect. A
   store that does not batch makes the second wait; nothing is required of
   an order the hits do not prove. Up to ``ATTEMPTS`` tries for a shared batch.
2. **Next thread.** Another thread of ``a`` calls once the first call returned.
3. **Other handle.** Handle ``b`` makes the change; ``a``'s next call sees it.

The changes and the operation that must see them:

- ``next-op-sees-release``: a release; the released lease's append is refused.
- ``next-op-sees-delete``: a leased delete; the deleted incarnation's lease
  can append nothing, and an unleased ``seq=1`` append after it is accepted
  (the deleted run's seq tail is gone too).
- ``next-op-sees-takeover``: the clock passes the ttl and another owner
  acquires; the new lease's append is accepted (a stale copy of the old row
  refuses it) and the old lease's is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import Background, installed
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Outcome,
    attempt,
    build_check,
    require,
)
from rulvar_conformance.harness.site import ManualClock, at_fresh_location
from rulvar_conformance.harness.surfaces import entry, expect_refused, leasable
from rulvar_store import Lease, OpenedStore
from rulvar_store.backend import (
    Failpoint,
    LocationFactory,
    caller_identity,
    mark_caller,
)

__all__ = ["SPEC", "next_op_sees_conformance"]

TTL_MS: Final = 60_000
ATTEMPTS: Final = 3
"""Tries at putting the second operation in the first one's batch."""
QUEUE_S: Final = 0.15
"""How long the second caller gets to queue behind the held first one. Only the
forced step's chance of a shared batch depends on it, never a verdict: the log
of hits decides whether the batch was shared."""
HOLD_LIMIT_S: Final = 20.0
CALL_LIMIT_S: Final = 30.0


class _Log:
    """Every failpoint hit of the two aimed callers, in the order they happened.

    Each caller marks itself (``mark_caller``) as the first thing its thread
    does and records the mark under its role; hits of anyone else pass through.
    The first caller is held at its ``after-fence-check`` until ``go``.
    """

    def __init__(self) -> None:
        self.marks: dict[str, object] = {}
        self.held = threading.Event()
        self.go = threading.Event()
        self.hits: list[tuple[str, str]] = []

    def as_caller(self, role: str, call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            self.marks[role] = mark_caller()
            return call()

        return run

    def hook(self, operation: str, point: Failpoint) -> None:
        me = caller_identity()
        role = next((r for r, mark in self.marks.items() if mark is me), None)
        if role is None:
            return
        self.hits.append((role, point))
        if role == "first" and point == "after-fence-check" and not self.held.is_set():
            self.held.set()
            self.go.wait(HOLD_LIMIT_S)
            self.hits.append(("first", "resumed"))

    def shared_batch(self) -> bool:
        """The second's ``after-begin`` came after the first resumed, before its commit."""
        try:
            resumed = self.hits.index(("first", "resumed"))
            commit = self.hits.index(("first", "before-commit"), resumed)
            began = self.hits.index(("second", "after-begin"), resumed)
        except ValueError:
            return False
        return began < commit


@dataclass(frozen=True)
class _Change:
    """One way of changing a run, and what the following operations must see.

    ``prepare(a, run_id)`` leases the run and returns the lease; ``change(h, run_id,
    lease)`` makes the change through handle ``h``; ``follow(h, run_id, lease)``
    is the next operation and ``judge(outcome, what)`` its verdict.
    """

    name: str
    prepare: Callable[[OpenedStore, str], Lease]
    change: Callable[[OpenedStore, str, Lease], Any]
    follow: Callable[[OpenedStore, str, Lease], Any]
    judge: Callable[[Outcome[Any], str], None]


def _leased(a: OpenedStore, run_id: str) -> Lease:
    lease = leasable(a).acquire(run_id, "owner-a")
    a.journal.append(run_id, entry(1, "a", 1), lease)
    return lease


def _stale_append(h: OpenedStore, run_id: str, lease: Lease) -> None:
    h.journal.append(run_id, entry(2, "stale", 2), lease)


def _accepted(outcome: Outcome[Any], what: str) -> None:
    require(outcome.ok, f"{what}: expected success, observed {outcome.error!r}")


def _release(h: OpenedStore, run_id: str, lease: Lease) -> None:
    leasable(h).release(lease)


def _delete(h: OpenedStore, run_id: str, lease: Lease) -> None:
    h.journal.delete(run_id, lease)


def _after_delete(h: OpenedStore, run_id: str, lease: Lease) -> None:
    _stale_append(h, run_id, lease)


def _takeover_change(clock: ManualClock) -> Callable[[OpenedStore, str, Lease], Any]:
    def change(h: OpenedStore, run_id: str, lease: Lease) -> Lease:
        clock.advance(TTL_MS + 1)
        return leasable(h).acquire(run_id, "owner-b")

    return change


def _successor_append(h: OpenedStore, run_id: str, lease: Lease) -> None:
    # The successor's lease is predicted (owner-b, the next epoch): the follower
    # must call while the takeover is still in flight. If the store granted
    # another epoch the verdict is skipped (_run_pair checks the prediction).
    successor = Lease(run_id, "owner-b", lease.epoch + 1)
    h.journal.append(run_id, entry(2, "b", 2), successor)


def _changes(clock: ManualClock) -> dict[str, _Change]:
    return {
        "release": _Change("release", _leased, _release, _stale_append, expect_refused),
        "delete": _Change("delete", _leased, _delete, _after_delete, expect_refused),
        "takeover": _Change(
            "takeover", _leased, _takeover_change(clock), _successor_append, _accepted
        ),
    }


def _forced_pair(a: OpenedStore, change: _Change, run_id: str) -> bool:
    """Step 1: hold the change inside its transaction, queue the follower behind it.

    Returns whether the two shared a batch (the verdict applies only then).
    """
    lease = change.prepare(a, run_id)
    log = _Log()
    with installed(log.hook):
        first = Background(
            log.as_caller("first", partial(change.change, a, run_id, lease))
        ).start()
        if not log.held.wait(HOLD_LIMIT_S):
            log.go.set()
            first.wait(CALL_LIMIT_S)
            return False
        second = Background(
            log.as_caller("second", partial(change.follow, a, run_id, lease))
        ).start()
        time.sleep(QUEUE_S)
        log.go.set()
        finished = first.wait(CALL_LIMIT_S) and second.wait(CALL_LIMIT_S)
    require(finished, f"a {change.name} or the call queued behind it never returned")
    require(first.outcome.ok, f"the {change.name} failed: {first.outcome.error!r}")
    shared = log.shared_batch()
    if shared and _prediction_holds(change, first.outcome, lease):
        change.judge(
            second.outcome,
            f"a call sharing the batch of a {change.name} of its run, queued behind "
            f"it (X9)",
        )
    return shared


def _prediction_holds(change: _Change, outcome: Outcome[Any], lease: Lease) -> bool:
    if change.name != "takeover":
        return True
    granted = outcome.value
    return isinstance(granted, Lease) and granted.epoch == lease.epoch + 1


def _has_hold_point(a: OpenedStore, change: _Change) -> bool:
    """Whether the change stops at ``after-fence-check`` (a dry run on its own run)."""
    seen: list[str] = []
    mark = mark_caller()

    def record(operation: str, point: Failpoint) -> None:
        if caller_identity() is mark:
            seen.append(point)

    lease = change.prepare(a, "next-op-dry-run")
    with installed(record):
        change.change(a, "next-op-dry-run", lease)
    return "after-fence-check" in seen


def _next_thread(a: OpenedStore, change: _Change, run_id: str) -> None:
    """Step 2: the change returns on one thread; another thread of ``a`` follows."""
    lease = change.prepare(a, run_id)
    done = Background(partial(change.change, a, run_id, lease)).start()
    require(done.wait(CALL_LIMIT_S), f"the {change.name} never returned")
    require(done.outcome.ok, f"the {change.name} failed: {done.outcome.error!r}")
    follower = Background(partial(change.follow, a, run_id, lease)).start()
    require(follower.wait(CALL_LIMIT_S), f"the call after {change.name} never returned")
    if _prediction_holds(change, done.outcome, lease):
        change.judge(
            follower.outcome,
            f"the next call of another thread of the same handle after a "
            f"{change.name} returned (X9)",
        )


def _other_handle(a: OpenedStore, b: OpenedStore, change: _Change, run_id: str) -> None:
    """Step 3: handle ``b`` makes the change; ``a`` (which read the run) follows."""
    lease = change.prepare(a, run_id)
    a.journal.load(run_id)
    done = attempt(partial(change.change, b, run_id, lease))
    require(done.ok, f"the {change.name} through another handle failed: {done.error!r}")
    if _prediction_holds(change, done, lease):
        change.judge(
            attempt(partial(change.follow, a, run_id, lease)),
            f"the next call of a handle after another handle's {change.name} (X9)",
        )


def _seq_tail_after_delete(a: OpenedStore) -> None:
    """A deleted run's seq tail is gone: an unleased seq=1 append is accepted (J6, M6)."""
    run_id = "next-op-seq-tail"
    lease = _leased(a, run_id)
    a.journal.append(run_id, entry(5, "a", 5), lease)
    a.journal.delete(run_id, lease)
    fresh = attempt(partial(a.journal.append, run_id, entry(1, "new", 1)))
    require(
        fresh.ok,
        f"an unleased seq=1 append after delete: expected success (the old tail is "
        f"gone with the run), observed {fresh.error!r}",
    )


def _sees(locations: LocationFactory, which: str) -> None:
    clock = ManualClock()
    change = _changes(clock)[which]
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        a = site.open(TTL_MS, now=clock)
        b = site.open(TTL_MS, now=clock)
        if _has_hold_point(a, change):
            for number in range(ATTEMPTS):
                if _forced_pair(a, change, f"next-op-forced-{number}"):
                    break
        _next_thread(a, change, "next-op-thread")
        _other_handle(a, b, change, "next-op-handle")
        if which == "delete":
            _seq_tail_after_delete(a)
        _final_state(b, which)


def _final_state(b: OpenedStore, which: str) -> None:
    """What a refused follower left: the runs read through the other handle."""
    for run_id in ("next-op-thread", "next-op-handle"):
        keys = [item.get("key") for item in b.journal.load(run_id)]
        expected = {"release": ["a-1"], "delete": [], "takeover": ["a-1", "b-2"]}[which]
        require(
            keys == expected,
            f"run {run_id} after a {which} and the call that followed it: expected "
            f"entries {expected}, observed {keys}",
        )


_CLAUSES: Final = ("X9", "L6", "M6")


def next_op_sees_conformance(certification: Certification) -> ConformanceSuite:
    """The three X9 checks over fresh locations (leases, a clock, two handles)."""
    locations = certification.locations
    titles = {
        "release": "a release by any caller, a batch-mate included, is seen by the next call",
        "delete": "a delete by any caller, a batch-mate included, is seen by the next call",
        "takeover": "a takeover by any caller, a batch-mate included, is seen by the next call",
    }
    return ConformanceSuite(
        "next-op-sees",
        tuple(
            build_check(
                f"next-op-sees-{which}",
                title,
                _CLAUSES,
                partial(_sees, locations, which),
            )
            for which, title in titles.items()
        ),
    )


SPEC: Final = SuiteSpec(
    "next-op-sees",
    next_op_sees_conformance,
    "leases",
    True,
    "a release, delete or takeover, by a batch-mate too, is seen next (X9)",
)
