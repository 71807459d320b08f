"""Retention (CONTRACT 12) over memory, file, SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from rulvar_store import LeaseHeldError, OpenedStore
from rulvar_store.ops import (
    delete_run,
    prune_candidates,
    prune_run,
    sweep_runs,
    with_brief_lease,
)
from tests.operator._journals import running, settle, terminal, write_run
from tests.operator._places import Place

BLOB = b"\x01checkpoint\x02"


def _seed(opened: OpenedStore, run_id: str = "run-a") -> None:
    write_run(
        opened.journal, run_id, [running(0), terminal(1, 0), settle(2, "ok")], "ok"
    )
    opened.transcripts.put(f"{run_id}/ckpt/0", BLOB)
    opened.transcripts.put(f"{run_id}/t1", BLOB)


def _leasable(place: Place) -> None:
    if place.backend == "file":
        pytest.skip("the file store has no leases: single-writer by contract (J8)")


@pytest.mark.clause("R1")
def test_delete_run_removes_blobs_then_journal_and_meta(place: Place) -> None:
    """R1: delete_run deletes every listed blob and then the journal and meta; other runs stay."""
    opened = place.open()
    _seed(opened, "run-a")
    _seed(opened, "run-b")
    delete_run(opened.journal, opened.transcripts, "run-a")
    assert opened.transcripts.list_refs("run-a") == []
    assert opened.journal.load("run-a") == []
    assert [meta["runId"] for meta in opened.journal.list_runs()] == ["run-b"]
    assert opened.transcripts.list_refs("run-b") == ["run-b/ckpt/0", "run-b/t1"]


@pytest.mark.clause("R1")
def test_delete_run_with_a_stale_lease_leaves_everything(place: Place) -> None:
    """R1, X4: a superseded lease's delete_run is refused by the fenced pair; blobs, journal, meta intact."""
    _leasable(place)
    clock = [1_000_000]
    opened = place.open(ttl_ms=1_000, now=lambda: clock[0])
    _seed(opened)
    stale = opened.journal.acquire("run-a", "sweeper")  # type: ignore[attr-defined]
    clock[0] += 5_000
    opened.journal.acquire("run-a", "worker")  # type: ignore[attr-defined]
    with pytest.raises(LeaseHeldError):
        delete_run(opened.journal, opened.transcripts, "run-a", lease=stale)
    assert opened.transcripts.list_refs("run-a") == ["run-a/ckpt/0", "run-a/t1"]
    assert len(opened.journal.load("run-a")) == 3
    assert opened.journal.list_runs()[0]["status"] == "ok"


@pytest.mark.clause("R4")
def test_delete_keeps_the_epoch_counter(place: Place) -> None:
    """R4, L5: after delete_run the next acquire of the same run id still gets a higher epoch."""
    _leasable(place)
    opened = place.open()
    _seed(opened)
    first = opened.journal.acquire("run-a", "owner")  # type: ignore[attr-defined]
    delete_run(opened.journal, opened.transcripts, "run-a", lease=first)
    again = opened.journal.acquire("run-a", "owner")  # type: ignore[attr-defined]
    assert again.epoch > first.epoch
    with pytest.raises(LeaseHeldError):
        opened.journal.append("run-a", running(0), first)


def _agent_ok(seq: int, ref: int, checkpoint: str, **fields: Any) -> dict[str, Any]:
    return terminal(seq, ref, checkpointRef=checkpoint, **fields)


@pytest.mark.clause("R2")
def test_prune_candidates_follow_the_exact_string_rule() -> None:
    """R2: a checkpoint is kept if its exact string appears elsewhere (value or key, any depth); substrings do not count."""
    entries = [
        running(0),
        _agent_ok(1, 0, "r/ckpt/2"),  # only its own field: pruned
        running(3),
        _agent_ok(4, 3, "r/ckpt/20"),  # named deep inside another entry: kept
        {"seq": 5, "kind": "step", "status": "ok", "value": {"nested": ["r/ckpt/20"]}},
        running(6),
        _agent_ok(7, 6, "r/ckpt/7"),  # an object key elsewhere: kept
        {"seq": 8, "kind": "step", "status": "ok", "value": {"r/ckpt/7": 1}},
        running(9),
        _agent_ok(10, 9, "r/ckpt/9"),  # another entry's checkpointRef: kept
        {
            "seq": 11,
            "kind": "agent",
            "status": "cancelled",
            "ref": 9,
            "checkpointRef": "r/ckpt/9",
        },
        running(12),
        _agent_ok(13, 12, "r/ckpt/13"),  # blob missing: not a candidate
    ]
    stored = ["r/ckpt/2", "r/ckpt/20", "r/ckpt/7", "r/ckpt/9"]
    assert prune_candidates(entries, stored) == ["r/ckpt/2"]


@pytest.mark.clause("R2")
def test_prune_keeps_parked_cancelled_escalated_and_dangling_attempts(
    place: Place,
) -> None:
    """R2: only ok agent terminals give up their checkpoints; other statuses and dangling runs keep theirs."""
    opened = place.open()
    entries = [
        running(0),
        _agent_ok(1, 0, "run-a/ckpt/0"),
        running(2),
        terminal(3, 2, "cancelled", checkpointRef="run-a/ckpt/2"),
        running(4),
        terminal(5, 4, "escalated", checkpointRef="run-a/ckpt/4"),
        {**running(6), "checkpointRef": "run-a/ckpt/6"},
        running(7, "step"),
        terminal(8, 7, "ok", kind="step", checkpointRef="run-a/ckpt/7"),
    ]
    write_run(opened.journal, "run-a", entries, "ok")
    refs = [
        "run-a/ckpt/0",
        "run-a/ckpt/2",
        "run-a/ckpt/4",
        "run-a/ckpt/6",
        "run-a/ckpt/7",
    ]
    for ref in refs:
        opened.transcripts.put(ref, BLOB)
    assert prune_run(opened.journal, opened.transcripts, "run-a") == 1
    assert opened.transcripts.list_refs("run-a") == refs[1:]
    assert prune_run(opened.journal, opened.transcripts, "run-a") == 0


@pytest.mark.clause("R3")
def test_sweep_skips_a_run_leased_by_a_live_owner(place: Place) -> None:
    """R3: the sweep's acquire meets a live lease: the run is skipped at once and left whole."""
    _leasable(place)
    opened = place.open()
    _seed(opened, "run-a")
    _seed(opened, "run-b")
    opened.journal.acquire("run-a", "worker")  # type: ignore[attr-defined]
    outcomes = {
        o.run_id: o
        for o in sweep_runs(opened.journal, opened.transcripts, ["run-a", "run-b"])
    }
    assert outcomes["run-a"].outcome == "skipped"
    assert outcomes["run-b"].outcome == "done"
    assert len(opened.journal.load("run-a")) == 3
    assert opened.journal.load("run-b") == []
    # The sweep released its own lease: the run can be leased again at once.
    opened.journal.acquire("run-b", "next")  # type: ignore[attr-defined]


@pytest.mark.clause("R3")
def test_a_sweep_that_lost_its_lease_mid_way_is_refused(place: Place) -> None:
    """R3: a takeover between the sweep's acquire and its delete makes the fenced pair refuse the delete."""
    _leasable(place)
    clock = [1_000_000]
    opened = place.open(ttl_ms=1_000, now=lambda: clock[0])
    _seed(opened)

    def stalled_delete(lease: Any) -> None:
        clock[0] += 5_000  # the sweep stalls past its ttl ...
        opened.journal.acquire("run-a", "worker")  # type: ignore[attr-defined]  # ... a worker takes over
        delete_run(opened.journal, opened.transcripts, "run-a", lease=lease)

    outcome = with_brief_lease(opened.journal, "run-a", "sweeper", stalled_delete)
    assert outcome.outcome == "refused"
    assert opened.transcripts.list_refs("run-a") == ["run-a/ckpt/0", "run-a/t1"]
    assert len(opened.journal.load("run-a")) == 3


@pytest.mark.clause("R3")
def test_sweep_without_leases_deletes_single_writer(tmp_path: Any) -> None:
    """R3: over a store without leases (the file store) the cascade runs unleased."""
    from rulvar_store import open_store

    opened = open_store(f"file://{tmp_path}")
    _seed(opened)
    (outcome,) = sweep_runs(opened.journal, opened.transcripts, ["run-a"])
    assert outcome.outcome == "done"
    assert opened.journal.list_runs() == []
    assert opened.transcripts.list_refs("run-a") == []
