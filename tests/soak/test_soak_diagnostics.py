"""How a soak reports what it found: grouped violations, plain words, its own outcomes.

A soak's verdict is read by a store author who has to fix the store from it: a
finding names the store call it concerns, says what happened in one reading,
repeats are counted instead of printed, and a soak that merely ran out of time
is not reported as a violation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance.soak import (
    SoakQuorum,
    referee_history,
    run_multi_process_soak,
)
from rulvar_conformance.soak.summary import SoakActivity, SoakHealth, SoakSummary
from rulvar_conformance.soak.tally import health_report
from rulvar_conformance.soak.violations import Violation, violation
from rulvar_store import JournalOrderViolation, Lease, MemoryStore
from rulvar_store.backend import LocationFactory
from tests.soak.test_referee import RUN, RUNS, ev, one_writer

pytestmark = pytest.mark.soak


def _summary(
    violations: list[Violation], quorum_missing: tuple[str, ...] = ()
) -> SoakSummary:
    return SoakSummary(
        settings={"seconds": 5.0},
        activity=SoakActivity(),
        health=SoakHealth(),
        storm_ms=5000.0,
        journal_entries=0,
        violations=tuple(violations),
        quorum_missing=quorum_missing,
        unknown=(),
    )


def _stale_cross_run_accepts(count: int) -> list[dict[str, Any]]:
    """A blob put into another run accepted ``count`` times (a store without the run check)."""
    return [
        ev(
            "stale-accept",
            3,
            10 + n,
            id=f"w3.0-{n}",
            surface="cross-run-live",
            run="soak-run-1",
            epoch=1,
        )
        for n in range(count)
    ]


@pytest.mark.clause("S10")
def test_repeated_findings_are_counted_once_with_a_few_examples() -> None:
    """180 accepted cross-run puts are one group: its count, its meaning, three examples."""
    store = MemoryStore()
    verdict = referee_history(
        store, store.transcripts(), _stale_cross_run_accepts(180), ()
    )
    lines = _summary(verdict.violations).verdict_lines()
    assert lines[0] == (
        "store-conformance multi-process-soak: 180 violations (1 kind by kind and surface)"
    )
    assert lines[1] == (
        "- CROSS-RUN ACCEPT on blob put into a run the lease does not hold: 180 findings"
    )
    assert sum(line.lstrip().startswith("e.g.") for line in lines) == 3
    assert lines[-1] == "    ... and 177 more"
    assert len(lines) < 10


@pytest.mark.clause("S10")
def test_no_finding_calls_a_lease_live_and_dead_at_once() -> None:
    """A write accepted under a superseded lease says so, naming the call, once per line."""
    store = MemoryStore()
    events = [
        *_stale_cross_run_accepts(1),
        ev(
            "stale-accept",
            1,
            50,
            id="w1.0-9",
            surface="blob-put",
            run=RUN,
            epoch=2,
        ),
    ]
    found = referee_history(store, store.transcripts(), events, ()).violations
    assert [item.kind for item in found] == ["CROSS-RUN ACCEPT", "STALE ACCEPT"]
    assert [item.surface for item in found] == [
        "blob put into a run the lease does not hold",
        "blob put",
    ]
    for item in found:
        assert not ("live" in item.line and "dead" in item.line), item.line
    assert "blob put on soak-run-0 was accepted with epoch 2 after a later epoch" in (
        found[1].line
    )


class RefusesTheFirstAppend:
    """The memory store, except that the first append is refused by the seq guard.

    That is what a holder sees when another writer's entry got into its run while
    its lease was current: the fence was checked outside the write transaction.
    """

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.refusals_left = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, run_id: str, item: Any, lease: Lease | None = None) -> None:
        if self.refusals_left:
            self.refusals_left -= 1
            raise JournalOrderViolation("seq taken", run_id, item.get("seq"))
        self.inner.append(run_id, item, lease)


@pytest.mark.clause("S10")
def test_a_holders_order_refusal_reads_as_a_bypassed_fence() -> None:
    """Not 'JournalOrderViolation under a live lease': the finding blames the fence."""
    store = MemoryStore(ttl_ms=20)
    events = one_writer(RefusesTheFirstAppend(store), store, tenures=1)
    found = referee_history(store, store.transcripts(), events, RUNS).violations
    bypassed = [item for item in found if item.kind == "FENCE BYPASSED"]
    assert len(bypassed) == 1, [item.line for item in found]
    assert bypassed[0].surface == "journal append"
    assert "another writer's entry was already in the run it held" in bypassed[0].line
    assert "live lease" not in bypassed[0].line
    lines = _summary(found).verdict_lines()
    assert any("not checked inside the write transaction" in line for line in lines)


def test_counts_agree_with_their_nouns() -> None:
    """'1 violation', never '1 violation(s)'."""
    one = _summary([violation("LOST WRITE: w0.0 append n1 is gone", "append")])
    assert one.verdict_lines()[0].endswith(": 1 violation (1 kind by kind and surface)")
    assert "(s)" not in "\n".join(one.verdict_lines())


def test_a_quorum_not_reached_is_its_own_outcome() -> None:
    """No violation seen but too little done: outcome, words and JSON say so."""
    summary = _summary([], quorum_missing=("takeovers 1/4",))
    assert summary.outcome == "quorum-not-reached"
    (line,) = summary.verdict_lines()
    assert line.startswith("QUORUM NOT REACHED: the soak stopped at its 5 s cap")
    assert "violation" not in line.split(";")[0]
    data = summary.to_json()
    assert data["outcome"] == "quorum-not-reached"
    assert data["passed"] is False
    assert data["violations"] == []
    assert data["quorum_missing"] == ["takeovers 1/4"]


def test_a_misspelt_count_fails_instead_of_reading_zero() -> None:
    """The activity record takes only the counts it names."""
    with pytest.raises(TypeError):
        SoakActivity.from_counts({"takovers": 3})


@pytest.mark.clause("S10")
def test_rulvar_soak_out_of_time_exits_3_and_says_which_file_it_soaked() -> None:
    """sqlite://:memory: soaks a temporary file (said), the cap comes first: exit 3."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "soak",
            "sqlite://:memory:",
            "--seconds",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "soaking a temporary file instead" in done.stdout
    assert "QUORUM NOT REACHED" in done.stdout
    assert "violation(s)" not in done.stdout
    assert "matplotlib" not in done.stdout, "no report asked for: no picture hint"
    assert "Traceback" not in done.stderr


@pytest.mark.clause("S10")
def test_rulvar_soak_help_documents_the_quorum_exit_code() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "soak", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "3 the quorum was not reached" in " ".join(done.stdout.split())


@pytest.mark.clause("S10")
def test_a_second_soak_into_the_same_report_folder_works(
    sqlite_locations: LocationFactory, tmp_path: Path
) -> None:
    """The folder of a finished soak is reused: the new soak's logs only, both pass."""
    report = tmp_path / "report"
    quorum = SoakQuorum(
        epochs=1,
        stale_rejects=1,
        appends=1,
        meta=0,
        blob_puts=0,
        blob_deletes=0,
        victims=0,
        live_cross_rejects=0,
    )
    for _ in range(2):
        location = sqlite_locations()
        try:
            result = run_multi_process_soak(
                location,
                writers=2,
                seconds=120,
                ttl_ms=200,
                quorum=quorum,
                companions=1,
                report_dir=report,
            )
        finally:
            location.remove()
        assert result.summary.outcome == "passed", result.summary.verdict_lines()
        logs = list((report / "logs").glob("*.jsonl"))
        assert len(logs) == result.activity.processes
        assert result.activity.companion_runs == result.activity.processes


MS = 1_000_000  # events carry monotonic nanoseconds


def test_a_kill_takeover_is_timed_from_the_first_ask_and_counts_its_refusals() -> None:
    """Writer 1 holds the run when it is killed; writer 2 asks 3 s later, is
    refused twice, then granted: the dead holder cost 40 ms and 2 refusals,
    while kill to grant (3.04 s) mostly measures when someone asked."""
    events = [
        ev("grant", 1, 100 * MS, run=RUN, epoch=1),
        ev("invoke", 2, 3_200 * MS, id="w2.0-1", op="acquire", run=RUN),
        ev("held", 2, 3_205 * MS, id="w2.0-1", run=RUN),
        ev("invoke", 2, 3_220 * MS, id="w2.0-2", op="acquire", run=RUN),
        ev("held", 2, 3_225 * MS, id="w2.0-2", run=RUN),
        ev("invoke", 2, 3_235 * MS, id="w2.0-3", op="acquire", run=RUN),
        ev("grant", 2, 3_240 * MS, id="w2.0-3", run=RUN, epoch=2),
    ]
    chaos = [{"t": "kill", "w": 1, "inc": 0, "ns": 200 * MS}]
    latency = health_report(events, chaos, 0, 4_000 * MS).kill_to_takeover_ms
    assert (latency.count, latency.refused) == (1, 2)
    assert (latency.ask_mean, latency.ask_max) == (40.0, 40.0)
    assert (latency.mean, latency.max) == (3_040.0, 3_040.0)
