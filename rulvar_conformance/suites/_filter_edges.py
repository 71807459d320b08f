"""Listing edges of the data-edges suite: every RunFilter field (M4, D7) and list_refs (T4).

The expected answers come from the kit's own restatement of D7 (never from the
store's library, which a store under test may have changed). ``statuses`` is
advisory (M4): with a non-empty ``statuses`` a store may return extra metas, so
the check then requires "no match dropped" and re-checks what came back with
D7; everything else (``status``, ``name``, ``tags``, and ``statuses=[]``, which
names no status at all) must be exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.kit import attempt, require
from rulvar_conformance.harness.probe import describe, shown
from rulvar_store import (
    ContractError,
    JournalStore,
    RunFilter,
    RunMeta,
    TranscriptStore,
)
from rulvar_store.backend import stable_stringify

__all__ = ["FILTER_METAS", "list_refs_exact", "run_filters"]


def _meta(run_id: str, status: str, **fields: Any) -> RunMeta:
    return {"runId": run_id, "status": status, "updatedAt": f"at-{run_id}", **fields}


FILTER_METAS: Final[tuple[RunMeta, ...]] = (
    _meta("f-a", "running", name="wf-a", tags=["t1", "t2"]),
    _meta("f-b", "ok", name="wf-b", tags=["t1"]),
    _meta("f-c", "suspended", name="wf-a", tags=["t2", "t3"]),
    _meta("f-d", "running"),  # no name, no tags
    _meta("f-e", "error", name="wf_a", tags=[]),  # LIKE decoy for name 'wf-a'
    _meta("f-f", "running", name="WF-A", tags=["t3", "t2", "t1"]),  # case decoy
    _meta("f-g", "cancelled", name="wf-a-2", tags=None),  # prefix decoy, null tags
    _meta("f-h", "running ", name="wf%", tags=["t1t2", "T1"]),  # padded status
    _meta("f-i", "exhausted", name="", tags=["t2"]),
)
"""Metas chosen so that each plausible shortcut (any() for all(), LIKE, prefix,
case folding, substring) admits or drops at least one of them."""

FILTERS: Final[tuple[RunFilter | None, ...]] = (
    None,
    RunFilter(),
    RunFilter(status="running"),
    RunFilter(status="ok"),
    RunFilter(status="nope"),
    RunFilter(statuses=[]),
    RunFilter(statuses=["running"]),
    RunFilter(statuses=["ok", "error", "cancelled"]),
    RunFilter(status="ok", statuses=["suspended"]),
    RunFilter(status="ok", statuses=[]),
    RunFilter(status="running", statuses=["running", "exhausted"]),
    RunFilter(name="wf-a"),
    RunFilter(name="wf_a"),
    RunFilter(name="wf%"),
    RunFilter(name=""),
    RunFilter(name="WF-A"),
    RunFilter(tags=[]),
    RunFilter(tags=["t1"]),
    RunFilter(tags=["t1", "t2"]),
    RunFilter(tags=["t2", "t3"]),
    RunFilter(tags=["t1", "t4"]),
    RunFilter(tags=["t4"]),
    RunFilter(status="running", tags=["t1"]),
    RunFilter(statuses=["running", "suspended"], name="wf-a"),
    RunFilter(status="ok", statuses=["suspended"], tags=["t2"]),
    RunFilter(name="wf-a", tags=["t2"]),
    RunFilter(status="running", name="wf-a", tags=["t1", "t2"]),
    RunFilter(statuses=[], name="wf-a"),
    RunFilter(statuses=[], tags=["t1"]),
    RunFilter(statuses=("suspended", "exhausted"), tags=("t2",)),
    RunFilter(status="error", statuses=(), name="wf_a", tags=()),
)


def d7_matches(meta: RunMeta, run_filter: RunFilter | None) -> bool:
    """D7, restated independently of ``rulvar_store.meta_matches_filter``."""
    if run_filter is None:
        return True
    status, statuses = run_filter.status, run_filter.statuses
    if status is not None or statuses is not None:
        in_status = status is not None and meta.get("status") == status
        in_statuses = statuses is not None and meta.get("status") in list(statuses)
        if not (in_status or in_statuses):
            return False
    if run_filter.name is not None and meta.get("name") != run_filter.name:
        return False
    wanted = list(run_filter.tags or ())
    if wanted:
        tags = meta.get("tags")
        if not isinstance(tags, list) or any(tag not in tags for tag in wanted):
            return False
    return True


def _filter_text(run_filter: RunFilter | None) -> str:
    if run_filter is None:
        return "list_runs()"
    fields = {
        name: getattr(run_filter, name)
        for name in ("status", "statuses", "name", "tags")
        if getattr(run_filter, name) is not None
    }
    return (
        "list_runs(RunFilter("
        + ", ".join(f"{k}={v!r}" for k, v in fields.items())
        + "))"
    )


def run_filters(store: JournalStore) -> None:
    """Every RunFilter field and combination against D7 (M4)."""
    stored = {meta["runId"]: stable_stringify(meta) for meta in FILTER_METAS}
    for meta in FILTER_METAS:
        store.put_meta(dict(meta))
    for run_filter in FILTERS:
        what = _filter_text(run_filter)
        returned = store.list_runs(run_filter)
        ids = [str(meta.get("runId")) for meta in returned]
        require(
            len(ids) == len(set(ids)), f"{what}: expected each run once, observed {ids}"
        )
        for meta in returned:
            run_id = meta.get("runId")
            require(
                stored.get(run_id) == stable_stringify(meta),
                f"{what}: expected the stored meta of {run_id!r}, observed {shown(meta)}",
            )
        expected = sorted(
            str(m["runId"]) for m in FILTER_METAS if d7_matches(m, run_filter)
        )
        advisory = run_filter is not None and bool(run_filter.statuses)
        observed = (
            sorted(ids)
            if not advisory
            else sorted(
                str(meta.get("runId"))
                for meta in returned
                if d7_matches(meta, run_filter)
            )
        )
        dropped = sorted(set(expected) - set(ids))
        require(
            not dropped,
            f"{what}: expected runs {expected}, observed {sorted(ids)} "
            f"(dropped matching runs {dropped})",
        )
        require(
            observed == expected,
            f"{what}: expected runs {expected}, observed {sorted(ids)}"
            + (" after re-checking with D7" if advisory else ""),
        )


# -- list_refs --------------------------------------------------------------------

REF_FAMILIES: Final[tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]] = (
    # (run id, its refs, refs of other runs that a sloppy prefix match would list)
    ("run-1",
     ("run-1/b", "run-1/a", "run-1/n/deep", "run-1/B", "run-1/a-b", "run-1/a_b",
      "run-1/a.b", "run-1/z9", "run-1/Z"),
     ("run-10/x", "run-1x/y", "run-1-2/z", "run-1", "run/1", "run-")),
    ("a_b", ("a_b/1", "a_b/x/2"), ("axb/1", "a_bc/1", "a_b")),
    ("a%", ("a%/1",), ("abc/1", "a%b/1", "a/1", "a")),
    ("r.1", ("r.1/k",), ("rx1/k", "r.10/k")),
)  # fmt: skip
"""Run ids with LIKE wildcards (``_``, ``%``) and ``.``, beside decoys they would
match as patterns or prefixes; slashless refs equal to a run id are stored but
never listed."""


def _store_family(transcripts: TranscriptStore, refs: Sequence[str]) -> bool:
    """Put every ref; ``False`` if the store refuses the names (typed, T8)."""
    for index, ref in enumerate(refs):
        outcome = attempt(partial(transcripts.put, ref, ref.encode()))
        if isinstance(outcome.error, ContractError) and index == 0:
            return False  # names this store refuses (file stores: T8, T9)
        require(
            outcome.ok,
            f"put {ref!r}: expected success, observed {describe(outcome.error)}",
        )
    return True


def list_refs_exact(transcripts: TranscriptStore) -> None:
    """``list_refs`` returns exactly the run's refs under ``run_id/``, sorted (T4)."""
    stored = [
        (run_id, own, others)
        for run_id, own, others in REF_FAMILIES
        if _store_family(transcripts, (*own, *others))
    ]
    require(stored, "expected the store to accept the refs of at least one family")
    for run_id, own, others in stored:
        listed = transcripts.list_refs(run_id)
        expected = sorted(own)
        require(
            listed == expected,
            f"list_refs({run_id!r}): expected exactly {expected} (sorted by code "
            f"point, only refs starting with {run_id + '/'!r}), observed {listed}",
        )
        if run_id in others:
            kept = transcripts.get(run_id)
            require(
                kept == run_id.encode(),
                f"get({run_id!r}): expected the slashless ref stored (T4), "
                f"observed {kept!r}",
            )
    empty = transcripts.list_refs("never-stored")
    require(empty == [], f"list_refs('never-stored'): expected [], observed {empty}")
