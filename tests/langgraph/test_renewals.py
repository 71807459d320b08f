"""The one renewal thread of the sync holds: each hold renewed, a loss kept apart, stop final.

Real SQLite leases with a short ttl; waits are bounded polls, never timed
assertions on speed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rulvar_langgraph._renewals import SharedRenewer
from rulvar_store import Lease, LeaseHeldError, open_store

TTL_MS = 600
INTERVAL_S = TTL_MS / 3000


class Counted:
    """The store's own renew, counting the calls that reached it."""

    def __init__(self, renew: object) -> None:
        self._renew = renew
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, lease: Lease) -> None:
        with self.lock:
            self.calls += 1
        self._renew(lease)  # type: ignore[operator]  # the store's bound renew


def _lost(renewer: SharedRenewer) -> object:
    """``renewer.lost`` as the renewal thread set it (read afresh each time)."""
    return renewer.lost


def test_every_hold_stays_live_past_its_ttl_and_a_loss_stays_its_own(
    tmp_path: Path,
) -> None:
    """Two holds renewed past 3 ttls by one thread; the one whose lease is taken
    over records the loss and stops, the other keeps renewing."""
    with open_store(f"sqlite:///{tmp_path / 'r.db'}", ttl_ms=TTL_MS) as opened:
        journal = opened.journal
        kept = journal.acquire("kept", "w")  # type: ignore[attr-defined]  # SQLite leases
        taken = journal.acquire("taken", "w")  # type: ignore[attr-defined]  # SQLite leases
        renew_kept, renew_taken = Counted(journal.renew), Counted(journal.renew)  # type: ignore[attr-defined]  # SQLite leases
        first = SharedRenewer(renew_kept, kept, INTERVAL_S)
        second = SharedRenewer(renew_taken, taken, INTERVAL_S)
        try:
            time.sleep(3 * TTL_MS / 1000)
            assert journal.peek_lease("kept").live  # type: ignore[attr-defined]  # SQLite peek
            assert journal.peek_lease("taken").live  # type: ignore[attr-defined]  # SQLite peek
            assert first.lost is None
            assert second.lost is None
            journal.delete("taken", taken)  # the lease row goes: the next renew fails
            deadline = time.monotonic() + 30
            while _lost(second) is None:
                assert time.monotonic() < deadline, "the lost renewal was never seen"
                time.sleep(0.02)
            assert isinstance(_lost(second), LeaseHeldError)
            calls_after_loss = renew_taken.calls
            time.sleep(3 * INTERVAL_S)
            assert renew_taken.calls == calls_after_loss
            assert journal.peek_lease("kept").live  # type: ignore[attr-defined]  # SQLite peek
            assert first.lost is None
        finally:
            first.stop()
            second.stop()
        calls_at_stop = renew_kept.calls
        time.sleep(3 * INTERVAL_S)
        assert renew_kept.calls == calls_at_stop


def test_stop_waits_for_a_renewal_in_flight(tmp_path: Path) -> None:
    """A stop during a renewal returns only once that renewal finished."""
    entered, leave = threading.Event(), threading.Event()
    finished: list[bool] = []
    with open_store(f"sqlite:///{tmp_path / 'r.db'}", ttl_ms=60_000) as opened:
        journal = opened.journal
        lease = journal.acquire("slow", "w")  # type: ignore[attr-defined]  # SQLite leases

        def slow_renew(held: Lease) -> None:
            entered.set()
            leave.wait(30)
            journal.renew(held)  # type: ignore[attr-defined]  # SQLite leases
            finished.append(True)

        renewer = SharedRenewer(slow_renew, lease, 0.01)
        assert entered.wait(30)
        stopper = threading.Thread(target=renewer.stop)
        stopper.start()
        stopper.join(0.2)
        assert stopper.is_alive()  # still waiting on the renewal in flight
        leave.set()
        stopper.join(30)
        assert not stopper.is_alive()
        assert finished == [True]
