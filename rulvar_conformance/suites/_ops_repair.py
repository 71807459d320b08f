"""``ops-repair-sound-under-lease``: the audit repair rewrites only sound classes, leased.

The repair path of ``rulvar runs audit --repair`` is ``reconcile_run_meta`` under
a brief lease of its own (``with_brief_lease``, as the CLI and the sweeps take
it). Its promises hold only if the store keeps its own: a meta written back
whole (unknown keys included), a lease that really excludes, a superseded lease
that really fences. The check lays out one run per audit verdict at one
location, repairs each through a second handle and reads the result through
the first:

- ``meta-behind`` and ``stranded`` runs are rewritten: status and ``updatedAt``
  change, every other key (an unknown one included) is kept (A3, A4);
- a ``suspect`` run (entries, no meta) gets no meta, a consistent one keeps its
  meta, and no journal changes (A3);
- a meta-behind run a live owner holds is skipped whole, and a repair carrying
  that run's superseded lease is refused and changes nothing (A4, F3); the
  holder still renews and writes afterwards.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.kit import attempt, require
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import entry, expect_refused, leasable
from rulvar_store import JournalEntry, Lease, OpenedStore, RunMeta
from rulvar_store.backend import LocationFactory
from rulvar_store.ops import reconcile_run_meta, with_brief_lease

__all__ = ["repair_sound_under_lease"]

BEHIND: Final = "ops-repair-behind"
STRANDED: Final = "ops-repair-stranded"
SUSPECT: Final = "ops-repair-suspect"
CONSISTENT: Final = "ops-repair-consistent"
HELD: Final = "ops-repair-held"
REPAIRED: Final = {BEHIND: "ok", STRANDED: "running"}
"""The runs a repair must rewrite, and the status each gets."""
UNKNOWN_KEY: Final = "operatorNote"
"""A key no store knows: a repair keeps it (A4: every other key)."""


def _settle(seq: int, status: str) -> JournalEntry:
    return {
        "kind": "decision",
        "status": "ok",
        "scope": "",
        "key": f"settle-{seq}",
        "seq": seq,
        "value": {"decisionType": "run_settle", "runStatus": status},
    }


def _running_dispatch(seq: int) -> JournalEntry:
    """A dispatch no entry answers: the run is still running (A1)."""
    return {"kind": "agent", "status": "running", "scope": "", "key": "d", "seq": seq}


def _meta(run_id: str, status: str) -> RunMeta:
    return {
        "runId": run_id,
        "status": status,
        "updatedAt": "2026-01-01T00:00:00.000Z",
        UNKNOWN_KEY: {"kept": run_id},
    }


def _lay_out(opened: OpenedStore, lease: Lease) -> None:
    """One run per verdict; ``HELD`` (meta-behind) is written under ``lease``."""
    journal = opened.journal
    layout: tuple[tuple[str, str | None, list[JournalEntry], Lease | None], ...] = (
        (BEHIND, "running", [entry(1, "ops", 1), _settle(2, "ok")], None),
        (STRANDED, "ok", [entry(1, "ops", 1), _running_dispatch(2)], None),
        (SUSPECT, None, [entry(1, "ops", 1)], None),
        (CONSISTENT, "running", [entry(1, "ops", 1)], None),
        (HELD, "running", [entry(1, "ops", 1), _settle(2, "ok")], lease),
    )
    for run_id, status, entries, held_by in layout:
        if status is not None:
            journal.put_meta(_meta(run_id, status), held_by)
        for item in entries:
            journal.append(run_id, item, held_by)


def _state(opened: OpenedStore) -> dict[str, Any]:
    journal = opened.journal
    metas = {m.get("runId"): m for m in journal.list_runs()}
    return {
        run_id: (metas.get(run_id), journal.load(run_id))
        for run_id in (BEHIND, STRANDED, SUSPECT, CONSISTENT, HELD)
    }


def _repair(opened: OpenedStore, run_id: str) -> tuple[str, int | None]:
    """The operator's repair of one run: a brief lease of its own, then reconcile."""

    def act(lease: Lease | None) -> int:
        return int(reconcile_run_meta(opened.journal, run_id, lease=lease).repaired)

    outcome = with_brief_lease(opened.journal, run_id, "ops-repairer", act)
    return outcome.outcome, outcome.done


def _require_rewritten(written: RunMeta, after: RunMeta | None, run_id: str) -> None:
    """``after`` is ``written`` with the repaired status and a new ``updatedAt``."""
    status = REPAIRED[run_id]
    require(after is not None, f"the meta of {run_id} is gone after its repair (A4)")
    assert after is not None  # narrowed; require raised otherwise
    before = written
    expected = {**before, "status": status}
    kept = {key: value for key, value in after.items() if key != "updatedAt"}
    require(
        kept == {k: v for k, v in expected.items() if k != "updatedAt"},
        f"a repair of {run_id} to {status!r} should change status and updatedAt "
        f"only, keeping every other key ({UNKNOWN_KEY} included); observed "
        f"{after!r} from {before!r} (A4)",
    )
    require(
        after.get("updatedAt") != before.get("updatedAt"),
        f"a repair of {run_id} kept the old updatedAt {before.get('updatedAt')!r} (A4)",
    )


def repair_sound_under_lease(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        a = site.open()
        b = site.open() if site.location.shared else a
        earlier = leasable(a).acquire(HELD, "earlier")
        leasable(a).release(earlier)
        holder = leasable(a).acquire(HELD, "holder")
        _lay_out(a, holder)
        before = _state(a)
        outcomes = {run_id: _repair(b, run_id) for run_id in before}
        expected = {
            BEHIND: ("done", 1),
            STRANDED: ("done", 1),
            SUSPECT: ("done", 0),
            CONSISTENT: ("done", 0),
            HELD: ("skipped", None),
        }
        require(
            outcomes == expected,
            f"expected the meta-behind and stranded runs repaired, the suspect and "
            f"consistent ones left, the held one skipped; observed {outcomes} (A3, A4)",
        )
        after = _state(a)
        for run_id, status in ((BEHIND, "running"), (STRANDED, "ok")):
            _require_rewritten(_meta(run_id, status), after[run_id][0], run_id)
        untouched = [
            run_id
            for run_id in before
            if run_id not in REPAIRED and before[run_id] != after[run_id]
        ]
        require(
            not untouched,
            f"a repair pass changed {untouched}: only meta-behind and stranded "
            "metas may be rewritten; a held run is skipped whole (A3, A4)",
        )
        changed_journals = [r for r in before if before[r][1] != after[r][1]]
        require(
            not changed_journals,
            f"a repair changed the journals of {changed_journals} (A4: metas only)",
        )
        stale = attempt(partial(reconcile_run_meta, b.journal, HELD, lease=earlier))
        expect_refused(stale, "a repair of a held run with its superseded lease (A4)")
        require(
            _state(a)[HELD] == before[HELD],
            "a refused repair with a superseded lease changed the held run (F3)",
        )
        leasable(a).renew(holder)
        a.journal.append(HELD, entry(3, "holder", 3), holder)
