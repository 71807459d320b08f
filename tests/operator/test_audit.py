"""Audit and reconcile (CONTRACT 11) over memory, file, SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from rulvar_store import LeaseHeldError
from rulvar_store.ops import (
    audit_run,
    audit_runs,
    dangling_dispatches,
    iter_run_audits,
    last_run_settle,
    reconcile_run_meta,
)
from tests.operator._journals import (
    SCENARIOS,
    entry,
    meta,
    running,
    settle,
    suspension,
    terminal,
    write_run,
)
from tests.operator._places import Place


@pytest.mark.clause("A1")
def test_last_run_settle_is_the_last_valid_settle() -> None:
    """A1: the LAST run_settle decision with a valid run status wins; invalid ones are skipped."""
    entries = [
        settle(0, "ok"),
        settle(1, "error"),
        entry(
            2,
            "decision",
            "ok",
            value={"decisionType": "run_settle", "runStatus": "bogus"},
        ),
        entry(3, "step", "ok", value={"decisionType": "run_settle", "runStatus": "ok"}),
    ]
    found = last_run_settle(entries)
    assert found is not None
    assert (found.run_status, found.seq) == ("error", 1)
    assert last_run_settle([running(0)]) is None


@pytest.mark.clause("A1")
def test_dangling_dispatches_are_running_entries_no_ref_names() -> None:
    """A1: a running entry of any kind is dangling until some entry's ref names its seq."""
    entries = [running(0), running(1, "step"), terminal(2, 0), running(3, "child")]
    assert dangling_dispatches(entries) == 2


@pytest.mark.clause("A2")
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_audit_verdicts(place: Place, scenario: str) -> None:
    """A2: each verdict path (no meta, settle present, no settle) derives the expected verdict."""
    entries, status, verdict, repair_to = SCENARIOS[scenario]
    store = place.open().journal
    write_run(store, "run-a", entries, status)
    audit = audit_run(store, "run-a")
    assert (audit.verdict, audit.repair_to) == (verdict, repair_to), audit.reason
    assert audit.journal_entries == len(entries)


@pytest.mark.clause("A2")
def test_audit_of_an_unknown_run_is_consistent_and_writes_nothing(place: Place) -> None:
    """A2.1: no meta and an empty journal is consistent; the audit fabricates no row."""
    store = place.open().journal
    audit = audit_run(store, "never-written")
    assert audit.verdict == "consistent"
    assert store.list_runs() == []


@pytest.mark.clause("A2")
def test_audit_counts_tail_dangling_and_open_suspensions(place: Place) -> None:
    """A2: the audit reports the settle, the entries after it, dangling dispatches and open suspensions."""
    store = place.open().journal
    write_run(
        store, "run-a", [running(0), settle(1, "ok"), suspension(2), running(3)], "ok"
    )
    audit = audit_run(store, "run-a")
    assert audit.journal_settle is not None
    assert audit.journal_settle.seq == 1
    assert (
        audit.entries_after_settle,
        audit.dangling_dispatches,
        audit.open_suspensions,
    ) == (2, 2, 1)
    assert (audit.verdict, audit.repair_to) == ("stranded", "running")


@pytest.mark.clause("A4")
def test_reconcile_rewrites_status_and_updated_at_and_keeps_every_other_key(
    place: Place,
) -> None:
    """A4: the repaired meta is the old one with status and updatedAt replaced, unknown keys kept."""
    store = place.open().journal
    extra: dict[str, Any] = {
        "segments": 3,
        "budgetUsd": 12.5,
        "soak": {"nonce": "n-1"},
        "tags": ["t"],
    }
    write_run(
        store, "run-a", [entry(0, "step", "ok"), settle(1, "ok")], "running", **extra
    )
    result = reconcile_run_meta(store, "run-a", now=lambda: 1_700_000_000_123)
    assert result.repaired
    assert result.audit.verdict == "meta-behind"
    stored = next(m for m in store.list_runs() if m["runId"] == "run-a")
    assert stored == {
        **meta("run-a", "ok", **extra),
        "updatedAt": "2023-11-14T22:13:20.123Z",
    }
    assert audit_run(store, "run-a").verdict == "consistent"


@pytest.mark.clause("A3")
@pytest.mark.parametrize(
    "scenario",
    ["no-settle-ok-open-suspension", "settled-and-matching", "no-meta-with-journal"],
)
def test_reconcile_never_rewrites_suspect_or_consistent_runs(
    place: Place, scenario: str
) -> None:
    """A3: only meta-behind and stranded repair; suspect and consistent metas stay byte-identical."""
    entries, status, _, _ = SCENARIOS[scenario]
    store = place.open().journal
    write_run(store, "run-a", entries, status)
    before = store.list_runs()
    result = reconcile_run_meta(store, "run-a")
    assert not result.repaired
    assert store.list_runs() == before


@pytest.mark.clause("A4")
def test_reconcile_with_a_superseded_lease_is_fenced_out(place: Place) -> None:
    """A4: over a fenced store, a successor acquiring mid-repair fences the repair out; meta unchanged."""
    if place.backend == "file":
        pytest.skip("the file store has no leases: single-writer by contract (J8)")
    clock = [1_000_000]
    store = place.open(ttl_ms=1_000, now=lambda: clock[0]).journal
    write_run(store, "run-a", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    stale = store.acquire("run-a", "repairer")  # type: ignore[attr-defined]
    clock[0] += 5_000
    store.acquire("run-a", "successor")  # type: ignore[attr-defined]
    with pytest.raises(LeaseHeldError):
        reconcile_run_meta(store, "run-a", lease=stale)
    assert store.list_runs()[0]["status"] == "running"


@pytest.mark.clause("A5")
def test_audit_runs_lists_non_consistent_runs_unless_asked_for_all(
    place: Place,
) -> None:
    """A5: audit_runs audits every listed run; consistent ones only with include_consistent."""
    store = place.open().journal
    for index, name in enumerate(sorted(SCENARIOS)):
        entries, status, _, _ = SCENARIOS[name]
        if status is not None:
            write_run(store, f"run-{index:02d}", entries, status)
    expected = {
        f"run-{index:02d}": SCENARIOS[name][2]
        for index, name in enumerate(sorted(SCENARIOS))
        if SCENARIOS[name][1] is not None
    }
    everything = {
        audit.run_id: audit.verdict
        for audit in audit_runs(store, include_consistent=True)
    }
    assert everything == expected
    reported = [audit.run_id for audit in audit_runs(store)]
    assert reported == sorted(
        run for run, verdict in expected.items() if verdict != "consistent"
    )
    assert [a.run_id for a in iter_run_audits(store)] == reported


@pytest.mark.clause("A5")
def test_a_corrupt_journal_is_a_diagnostic_and_the_pass_goes_on(place: Place) -> None:
    """A5: a journal line that does not parse makes that run 'unreadable'; the other runs are audited."""
    if place.corrupt_journal is None:
        pytest.skip(
            "the memory store keeps parsed-checked text only; nothing to corrupt"
        )
    store = place.open().journal
    write_run(store, "run-a", [running(0), running(1)], "ok")
    write_run(store, "run-b", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    place.corrupt_journal("run-a")
    audits = {audit.run_id: audit for audit in iter_run_audits(place.open().journal)}
    assert audits["run-a"].verdict == "unreadable"
    assert "journal" in audits["run-a"].reason
    assert audits["run-b"].verdict == "meta-behind"


@pytest.mark.clause("A5")
@pytest.mark.parametrize("case", ["not-json", "not-an-object", "status-not-a-string"])
def test_a_malformed_meta_row_is_a_diagnostic_and_the_pass_goes_on(
    place: Place, case: str
) -> None:
    """A5: a meta that is not JSON, not an object, or has no string status is that run's diagnostic."""
    if place.corrupt_meta_text is None:
        pytest.skip("the memory store parses meta on write; nothing to corrupt")
    texts = {
        "not-json": place.unparsable_meta,
        "not-an-object": "[1, 2]",
        "status-not-a-string": '{"runId": "run-a", "status": 7}',
    }
    text = texts[case]
    if text is None:
        pytest.skip(
            f"{place.backend}: the meta indexes cast to jsonb and refuse such a row"
        )
    store = place.open().journal
    write_run(store, "run-a", [running(0)], "running")
    write_run(store, "run-b", [entry(0, "step", "ok"), settle(1, "ok")], "running")
    place.corrupt_meta_text("run-a", text)
    audits = {audit.run_id: audit for audit in iter_run_audits(place.open().journal)}
    assert audits["run-a"].verdict == "unreadable"
    assert audits["run-a"].repair_to is None
    assert audits["run-b"].verdict == "meta-behind"


@pytest.mark.clause("A2")
def test_a_journal_the_fold_rejects_is_unreadable(place: Place) -> None:
    """A2: a resolution whose ref names no earlier entry cannot be folded; the audit says so, no raise."""
    store = place.open().journal
    write_run(store, "run-a", [entry(0, "resolution", "ok", ref=5)], "running")
    audit = audit_run(store, "run-a")
    assert audit.verdict == "unreadable"
    assert "fold" in audit.reason
