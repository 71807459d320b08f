"""``operator_tools_conformance(locations)``: the operator tools against the store under test.

``rulvar runs audit``, ``rulvar runs delete`` and the retention sweeps run the
functions of ``rulvar_store.ops`` over a live store. Their promises hold only
if the store keeps its own (a read that writes, a ``list_refs`` or a blob
delete that matches by prefix): these checks run the tools themselves.

- ``ops-audit-read-only``: auditing every run (consistent ones included)
  changes nothing any handle can see: metas, journals, blobs, and the lease and
  epoch of a live holder, who still writes and renews afterwards (A2, A5).
- ``ops-sweep-skips-live-owner``: a delete sweep over a run a live owner holds
  skips it, whole; a free run is deleted, blobs and journal, its epoch kept
  (a later acquire is above it); a neighbour run whose id extends the swept
  one's keeps everything (R1, R3, R4).
- ``ops-prune-unreferenced``: a prune deletes the checkpoint no entry
  references and keeps the referenced one, even when the kept ref extends the
  deleted one's text (R2).
- ``ops-repair-sound-under-lease``: the audit repair, under a brief lease of
  its own, rewrites only meta-behind and stranded metas (status and updatedAt,
  every other key kept), skips a live owner's run, and a repair with a
  superseded lease is refused and changes nothing (A3, A4, F3); see
  ``_ops_repair``.
- ``ops-stale-lease-changes-nothing``: ``delete_run`` and ``prune_run`` with a
  superseded lease raise ``LeaseHeldError`` and leave blobs and journal whole
  (R1, F3).
- ``ops-listing-every-page``, ``ops-audit-takes-no-lease`` and
  ``ops-sweep-deletes-under-its-lease``: see ``_ops_walks`` (R5-R7).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    require,
)
from rulvar_conformance.harness.site import Site, at_fresh_location
from rulvar_conformance.harness.surfaces import entry, expect_refused, leasable, meta
from rulvar_conformance.suites._ops_repair import repair_sound_under_lease
from rulvar_conformance.suites._ops_walks import WALK_CHECKS
from rulvar_store import JournalEntry, Lease, OpenedStore
from rulvar_store.backend import LocationFactory
from rulvar_store.ops import audit_runs, delete_run, prune_run, sweep_runs

__all__ = ["SPEC", "operator_tools_conformance"]

HELD: Final = "ops-run"
FREE: Final = "ops-free"
NEIGHBOUR: Final = "ops-free-2"
"""Its id extends FREE's: a prefix match on FREE reaches it."""


def _agent_ok(ref: int, checkpoint: str) -> JournalEntry:
    return {
        "kind": "agent",
        "status": "ok",
        "scope": "",
        "key": f"agent-{ref}",
        "ref": ref,
        "checkpointRef": checkpoint,
    }


def _fill(opened: OpenedStore, run_id: str, lease: Lease | None) -> None:
    opened.journal.put_meta(meta(run_id, "ops", 1), lease)
    opened.journal.append(run_id, entry(1, "ops", 1), lease)
    opened.transcripts.put(f"{run_id}/ckpt/1", b"one", lease)
    opened.transcripts.put(f"{run_id}/ckpt/10", b"ten", lease)


def _snapshot(opened: OpenedStore, run_ids: list[str]) -> dict[str, Any]:
    journal, blobs = opened.journal, opened.transcripts
    return {
        "metas": sorted(
            str(m) for m in journal.list_runs() if m.get("runId") in run_ids
        ),
        **{
            run_id: (
                journal.load(run_id),
                {ref: blobs.get(ref) for ref in blobs.list_refs(run_id)},
            )
            for run_id in run_ids
        },
    }


def _held(site: Site) -> tuple[OpenedStore, OpenedStore, Lease]:
    """Two handles (one on an unshared location) and a live holder's filled run."""
    a = site.open()
    b = site.open() if site.location.shared else a
    lease = leasable(a).acquire(HELD, "holder")
    _fill(a, HELD, lease)
    return a, b, lease


def _audit_read_only(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        a, b, lease = _held(site)
        _fill(a, FREE, None)
        before = _snapshot(b, [HELD, FREE])
        audit_runs(a.journal, include_consistent=True)
        after = _snapshot(b, [HELD, FREE])
        changed = sorted(key for key in before if before[key] != after[key])
        require(not changed, f"auditing every run changed {changed} (A2: read-only)")
        leasable(a).renew(lease)
        a.journal.append(HELD, entry(2, "holder", 2), lease)
        intruder = attempt(partial(leasable(b).acquire, HELD, "intruder"))
        expect_refused(intruder, "an acquire after an audit of a held run (A2)")


def _sweep(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        a, b, lease = _held(site)
        _fill(a, FREE, None)
        _fill(a, NEIGHBOUR, None)
        earlier = leasable(a).acquire(FREE, "earlier")
        leasable(a).release(earlier)
        kept = _snapshot(b, [HELD, NEIGHBOUR])
        outcomes = {
            o.run_id: o.outcome
            for o in sweep_runs(b.journal, b.transcripts, [HELD, FREE])
        }
        require(
            outcomes == {HELD: "skipped", FREE: "done"},
            f"expected the held run skipped and the free one deleted, observed "
            f"{outcomes} (R3)",
        )
        require(
            _snapshot(b, [HELD, NEIGHBOUR]) == kept,
            f"a sweep of {FREE} changed the held run or the neighbour {NEIGHBOUR} "
            "(R1: only the swept run's blobs and journal)",
        )
        gone = (b.journal.load(FREE), b.transcripts.list_refs(FREE))
        require(gone == ([], []), f"the swept run kept {gone} (R1)")
        require(
            all(m.get("runId") != FREE for m in b.journal.list_runs()),
            "the swept run is still listed (R1, M6)",
        )
        after = leasable(b).acquire(FREE, "after")
        require(
            after.epoch > earlier.epoch,
            f"the epoch after the sweep is {after.epoch}, not above {earlier.epoch} (R4)",
        )
        a.journal.append(HELD, entry(2, "holder", 2), lease)


def _prune(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        a, b, lease = _held(site)
        a.journal.append(HELD, _agent_ok(1, f"{HELD}/ckpt/1"), lease)
        a.journal.append(HELD, _agent_ok(2, f"{HELD}/ckpt/10"), lease)
        a.journal.append(HELD, {**entry(4, "ops", 4), "uses": f"{HELD}/ckpt/10"}, lease)
        pruned = prune_run(a.journal, a.transcripts, HELD, lease=lease)
        left = {ref: b.transcripts.get(ref) for ref in b.transcripts.list_refs(HELD)}
        require(
            pruned == 1 and left == {f"{HELD}/ckpt/10": b"ten"},
            f"a prune of one unreferenced checkpoint (ckpt/1; ckpt/10 is referenced) "
            f"reported {pruned} and left {sorted(left)} (R2)",
        )


def _stale_lease(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        a, b, stale = _held(site)
        a.journal.append(HELD, _agent_ok(1, f"{HELD}/ckpt/1"), stale)
        leasable(a).release(stale)
        successor = leasable(b).acquire(HELD, "new")
        before = _snapshot(b, [HELD])
        for name, tool in (("delete_run", delete_run), ("prune_run", prune_run)):
            outcome = attempt(
                partial(tool, a.journal, a.transcripts, HELD, lease=stale)
            )
            expect_refused(outcome, f"{name} with a superseded lease (R1, F3)")
            require(
                _snapshot(b, [HELD]) == before,
                f"a refused {name} with a superseded lease changed the run (F3)",
            )
        b.journal.append(HELD, entry(9, "new", 9), successor)


_CHECKS: Final = (
    (
        "ops-audit-read-only",
        "auditing every run changes nothing and leaves a live holder whole",
        ("A2", "A5"),
        _audit_read_only,
    ),
    (
        "ops-sweep-skips-live-owner",
        "a delete sweep skips a live owner's run and deletes only the free run, epoch kept",
        ("R1", "R3", "R4"),
        _sweep,
    ),
    (
        "ops-prune-unreferenced",
        "a prune deletes only the checkpoint no entry references",
        ("R2",),
        _prune,
    ),
    (
        "ops-repair-sound-under-lease",
        "a repair rewrites only meta-behind and stranded metas, under a lease of its own",
        ("A3", "A4", "F3"),
        repair_sound_under_lease,
    ),
    (
        "ops-stale-lease-changes-nothing",
        "delete_run and prune_run with a superseded lease are refused and change nothing",
        ("R1", "F3"),
        _stale_lease,
    ),
)


def operator_tools_conformance(certification: Certification) -> ConformanceSuite:
    """The operator-tool checks over fresh locations (leases and fenced blobs)."""
    locations = certification.locations
    return ConformanceSuite(
        "operator-tools",
        tuple(
            build_check(check_id, title, clauses, partial(body, locations))
            for check_id, title, clauses, body in (*_CHECKS, *WALK_CHECKS)
        ),
    )


SPEC: Final = SuiteSpec(
    "operator-tools",
    operator_tools_conformance,
    "fenced_transcripts",
    True,
    "audit, repair, sweeps, prune and delete_run over the store (A2-A4, R1-R7)",
)
