"""The ``meta-separation`` check of the journal suite (CONTRACT 8.2, M1-M6).

Meta lives beside the journal: one whole record per run, filtered exactly (D7),
round-tripped field by field (D6), found by ``get_meta`` when the store has it,
and removed together with the journal by ``delete``.
"""

from __future__ import annotations

from typing import Any, Final

from rulvar_conformance.harness.kit import Fresh, require, same_json
from rulvar_store import JournalEntry, JournalStore, RunFilter, RunMeta, has_meta_lookup

__all__ = ["RICH_META", "meta_separation"]

RUN: Final = "conformance-run"


def _entry() -> JournalEntry:
    return {"hashVersion": 2, "seq": 0, "scope": "", "kind": "step", "status": "ok"}


RICH_META: Final[dict[str, Any]] = {
    "runId": RUN,
    "status": "suspended",
    "updatedAt": "2026-01-01T00:00:03.000Z",
    "name": "wf-a",
    "tags": ["team:core", "tier:1"],
    "budgetUsd": 12.5,
    "maxInFlightExposureUsd": 0.07,
    "budgetPolicy": "immutable-lifetime",
    "strictPricing": {"maxRatesAgeDays": 30, "allowUnpriced": ["local:llama"]},
    "segments": 3,
    "argsProvided": True,
    "argsHash": "a" * 64,
    "genesis": "g" * 26,
    "execKeyDerivation": 2,
    "scope": {"tenant": "acme", "account": "prod-billing", "project": "audit"},
    "scopeNormalize": {"version": 1, "fields": {"tenant": ["trim", "lowercase"]}},
    "conformanceUnknownKey": {"nested": [1, "δ", None]},
}


def _meta(status: str, updated_at: str, **extra: Any) -> RunMeta:
    return {"runId": RUN, "status": status, "updatedAt": updated_at, **extra}


def _ids(store: JournalStore, run_filter: RunFilter | None = None) -> list[str]:
    return sorted(str(meta.get("runId")) for meta in store.list_runs(run_filter))


def meta_separation(stores: Fresh[JournalStore]) -> None:
    """Meta upserts whole records, filters exactly, round-trips and deletes (M1-M6)."""
    with stores() as store:
        require(store.load("never-written") == [], "load of an unknown run is not []")
        tags = ["team:core", "tier:1"]
        store.put_meta(_meta("running", "t1", name="wf-a", tags=tags, mergeProbe=1))
        store.put_meta(_meta("running", "t2", name="wf-a", tags=tags))
        other = {"runId": "other-run", "status": "running", "updatedAt": "t2"}
        store.put_meta({**other, "name": "wf-b"})
        metas = [m for m in store.list_runs() if m.get("runId") == RUN]
        require(len(metas) == 1, f"{len(metas)} meta records for one run after upsert")
        require("mergeProbe" not in metas[0], "put_meta merged instead of replacing")
        store.put_meta(_meta("suspended", "t3", name="wf-a", tags=tags))
        suspended = store.list_runs(RunFilter(status="suspended"))
        require(
            RUN in _ids(store, RunFilter(status="suspended")), "status filter lost it"
        )
        wrong = [m.get("runId") for m in suspended if m.get("status") != "suspended"]
        require(not wrong, f"status='suspended' returned other statuses: {wrong}")
        named = _ids(store, RunFilter(name="wf-b"))
        require(named == ["other-run"], f"name='wf-b' returned {named}")
        tagged = _ids(store, RunFilter(tags=["team:core"]))
        require(tagged == [RUN], f"tags=['team:core'] returned {tagged}")
        store.put_meta(dict(RICH_META))
        stored = next(m for m in store.list_runs() if m.get("runId") == RUN)
        for key, value in RICH_META.items():
            require(
                same_json(stored.get(key), value), f"meta {key!r} did not round-trip"
            )
        require(set(stored) == set(RICH_META), f"meta keys changed: {sorted(stored)}")
        either = _ids(store, RunFilter(statuses=["suspended", "running"]))
        dropped = sorted({RUN, "other-run"} - set(either))
        require(not dropped, f"statuses=['suspended','running'] dropped {dropped}")
        if has_meta_lookup(store):
            require(same_json(store.get_meta(RUN), RICH_META), "get_meta disagrees")
            missing = store.get_meta("conformance-missing-run")
            require(missing is None, f"get_meta of a missing run gave {missing!r}")
        store.append(RUN, _entry())
        store.delete(RUN)
        require(store.load(RUN) == [], "delete left journal entries")
        require(_ids(store) == ["other-run"], f"after delete metas are {_ids(store)}")
        if has_meta_lookup(store):
            require(store.get_meta(RUN) is None, "get_meta still finds a deleted run")
