"""More operator-tool checks: every page listed, an audit that leases nothing, a sweep under its lease.

- ``ops-listing-every-page`` (R5): the listing the tools walk
  (``iter_listed_runs``: pages where the store offers ``meta_page``) yields
  every run with a meta exactly once, in run-id order, at page sizes 1, 3, the
  run count and the default; and a full audit reports every run.
- ``ops-audit-takes-no-lease`` (R6): auditing every run moves no epoch: the
  next acquire of an audited run gets the same epoch step as that of a run the
  audit never listed (an audit that takes a brief lease "for a consistent
  snapshot" moves the epoch and fences out a stalled holder).
- ``ops-sweep-deletes-under-its-lease`` (R3, R7): a delete sweep stopped right
  after it took its brief lease, while the clock moves past that lease and a
  successor takes the run and writes: the sweep's delete is refused and the
  successor's run stays whole.
"""

from __future__ import annotations

from typing import Any, Final

from rulvar_conformance.harness.failpause import Background
from rulvar_conformance.harness.kit import not_run, require
from rulvar_conformance.harness.site import ManualClock, at_fresh_location
from rulvar_conformance.harness.stopping import StopAt, reached_or_done
from rulvar_conformance.harness.surfaces import entry, leasable, meta
from rulvar_store.backend import LocationFactory, set_failpoint_hook
from rulvar_store.ops import (
    DEFAULT_PAGE_SIZE,
    iter_listed_runs,
    iter_run_audits,
    sweep_runs,
)

__all__ = ["WALK_CHECKS"]

RUNS: Final = 8
TTL_MS: Final = 60_000
BACKGROUND_S: Final = 10.0


def _run_ids() -> list[str]:
    return [f"ops-page-{number:02d}" for number in range(RUNS)]


def _listing_every_page(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        opened = site.open()
        expected = _run_ids()
        for run_id in reversed(expected):  # written out of order on purpose
            opened.journal.put_meta(meta(run_id, "ops", 1))
            opened.journal.append(run_id, entry(1, "ops", 1))
        for size in (1, 3, RUNS, DEFAULT_PAGE_SIZE):
            listed = [
                run.run_id for run in iter_listed_runs(opened.journal, page_size=size)
            ]
            require(
                listed == expected,
                f"the tools' listing at page size {size} yielded {listed}, expected "
                f"every run once in run-id order {expected} (R5)",
            )
        audited = [
            a.run_id for a in iter_run_audits(opened.journal, include_consistent=True)
        ]
        require(
            audited == expected,
            f"a full audit reported {audited}, expected every run {expected} (R5)",
        )


def _audit_takes_no_lease(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        opened = site.open()
        store = leasable(opened)
        audited, control = "ops-audited", "ops-control"
        for run_id in (audited, control):
            lease = store.acquire(run_id, "earlier")
            opened.journal.put_meta(meta(run_id, "ops", 1), lease)
            opened.journal.append(run_id, entry(1, "ops", 1), lease)
            store.release(lease)
        first = {
            run_id: store.acquire(run_id, "probe") for run_id in (audited, control)
        }
        for lease in first.values():
            store.release(lease)
        # The control run's meta is gone from the listing, so the audit never sees it.
        control_lease = store.acquire(control, "hide")
        opened.journal.delete(control, control_lease)
        list(iter_run_audits(opened.journal, include_consistent=True))
        after = {
            run_id: store.acquire(run_id, "probe") for run_id in (audited, control)
        }
        steps = {run_id: after[run_id].epoch - first[run_id].epoch for run_id in after}
        require(
            steps[audited] == steps[control] - 1,
            f"an audit moved the epoch of a run it audited: its next acquire stepped "
            f"{steps[audited]} where an unaudited run's stepped {steps[control] - 1} "
            "(R6: the audit takes no lease, not even a brief one)",
        )


def _sweep_under_its_lease(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("clock",)) as site:
        clock = ManualClock()
        opened = site.open(TTL_MS, now=clock)
        store = leasable(opened)
        run_id = "ops-swept"
        opened.journal.put_meta(meta(run_id, "ops", 1))
        opened.journal.append(run_id, entry(1, "ops", 1))
        opened.transcripts.put(f"{run_id}/ckpt/1", b"old")
        stop = StopAt({"after-commit"})
        previous = set_failpoint_hook(stop)
        try:

            def sweep() -> list[Any]:
                stop.aim()
                return list(sweep_runs(opened.journal, opened.transcripts, [run_id]))

            sweeping = Background(sweep).start()
            if not reached_or_done(stop, sweeping):
                stop.go.set()
                sweeping.wait(BACKGROUND_S)
                not_run(
                    "the store never calls rulvar_store.backend.hit (no after-commit failpoint to stop the sweep at)"
                )
            clock.advance(TTL_MS + 1)  # the sweep's brief lease lapses mid-way
            successor = store.acquire(run_id, "successor")
            opened.journal.append(run_id, entry(2, "successor", 2), successor)
            opened.transcripts.put(f"{run_id}/ckpt/2", b"successor's", successor)
            stop.go.set()
            require(sweeping.wait(BACKGROUND_S), "the sweep never ended")
        finally:
            stop.go.set()
            set_failpoint_hook(previous)
        seqs = [item.get("seq") for item in opened.journal.load(run_id)]
        refs = opened.transcripts.list_refs(run_id)
        require(
            seqs == [1, 2] and f"{run_id}/ckpt/2" in refs,
            f"a sweep whose brief lease was taken over mid-way deleted the "
            f"successor's run: entries {seqs}, blobs {refs} (R3, R7: the sweep "
            "deletes under its lease, so a superseded sweep is refused)",
        )


WALK_CHECKS: Final = (
    (
        "ops-listing-every-page",
        "the tools' listing yields every run once, in order, at any page size",
        ("R5", "A5"),
        _listing_every_page,
    ),
    (
        "ops-audit-takes-no-lease",
        "auditing every run moves no run's epoch",
        ("R6", "A2"),
        _audit_takes_no_lease,
    ),
    (
        "ops-sweep-deletes-under-its-lease",
        "a sweep taken over mid-way is refused; the successor's run stays whole",
        ("R3", "R7"),
        _sweep_under_its_lease,
    ),
)
