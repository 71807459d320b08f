"""No check can hang: a store that never answers fails its checks, and the run goes on.

``NeverHandsOn`` is the real SQLite store with a group commit whose first leader
keeps leadership: its second write waits forever. Under a short deadline each
check fails as "did not finish", with the stuck thread's stack pointing into
the group commit, and the next check still runs and is reported.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rulvar_conformance import (
    Certification,
    ConformanceSuite,
    certification_suites,
    run_suites,
)
from rulvar_conformance.harness.certify import RunBudget, stuck_threads
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_sqlite import NeverHandsOn, sqlite_locations

DEADLINE_S = 1.0


@pytest.mark.clause("C4")
def test_a_group_commit_that_never_hands_on_fails_checks_instead_of_hanging(
    tmp_path: Path,
) -> None:
    """Two journal checks: both fail as 'did not finish in 1 s', each with a thread dump."""
    certification = Certification(
        sqlite_locations(NeverHandsOn, tmp_path), frozenset({"leases"})
    )
    (journal,) = certification_suites(certification, ["journal"])
    two = ConformanceSuite(journal.name, journal.checks[:2])
    before = len(stuck_threads())
    results = run_suites([two], check_timeout_s=DEADLINE_S)
    assert [result.status for result in results] == ["failed", "failed"]
    for result, check in zip(results, two.checks, strict=True):
        assert result.error is not None
        assert result.error.startswith(
            f"store-conformance {check.id}: did not finish in 1 s"
        ), result.error
        assert f"--- thread 'check {check.id}'" in result.error
        assert "_group_commit.py" in result.error, "the dump shows where it waits"
    assert len(stuck_threads()) == before + 2


@pytest.mark.clause("K10")
def test_a_run_over_a_hanging_store_is_bounded_as_a_whole(tmp_path: Path) -> None:
    """K10: after one hang the later checks get the short deadline; past the run's
    limit the rest fail as not started, so the run ends however many checks remain."""
    certification = Certification(
        sqlite_locations(NeverHandsOn, tmp_path), frozenset({"leases"})
    )
    (journal,) = certification_suites(certification, ["journal"])
    budget = RunBudget(check_timeout_s=1.5, run_timeout_s=3.0, after_hang_s=0.5)
    started = time.monotonic()
    results = run_suites([journal], budget=budget)
    took = time.monotonic() - started
    assert len(results) == len(journal.checks) >= 4
    errors = [
        (result.error or "").split("\n")[0]
        for result in results
        if result.status == "failed"
    ]
    hangs = [error for error in errors if ": did not finish in" in error]
    # A check with one write passes (the first leader does run its batch).
    assert "did not finish in 1.5 s" in hangs[0], hangs[0]
    # Later hangs get the short deadline, the last perhaps only what was left.
    later = [float(e.split("did not finish in ")[1].split(" s")[0]) for e in hangs[1:]]
    assert later, hangs
    assert all(seconds <= 0.5 for seconds in later), hangs
    assert len(hangs) >= 2, errors
    assert "not started: the run's limit of 3 s was spent" in errors[-1], errors[-1]
    assert budget.hung >= 2
    assert took < 3.0 + 1.5, took


@pytest.mark.clause("K10")
def test_an_honest_run_is_untouched_by_its_budget(tmp_path: Path) -> None:
    """K10: the bounds never touch a store that does not hang (no false positive)."""
    certification = Certification(
        sqlite_locations(SqliteStore, tmp_path), frozenset({"leases"})
    )
    (journal,) = certification_suites(certification, ["journal"])
    budget = RunBudget(check_timeout_s=60.0, run_timeout_s=120.0)
    results = run_suites([journal], budget=budget)
    assert [r.status for r in results] == ["passed"] * len(results), results
    assert budget.hung == 0


@pytest.mark.clause("K10")
def test_an_isolated_run_starts_no_check_past_its_limit(tmp_path: Path) -> None:
    """K10 for --isolate: past the run's limit no child is started, each row says so."""
    from rulvar_conformance.harness.isolation import run_isolated

    certification = Certification(
        sqlite_locations(SqliteStore, tmp_path), frozenset({"leases"})
    )
    (journal,) = certification_suites(certification, ["journal"])
    budget = RunBudget(check_timeout_s=5.0, run_timeout_s=0.001)
    time.sleep(0.01)
    results = run_isolated(
        f"sqlite:///{tmp_path / 'isolated.db'}",
        [journal],
        selection=["journal"],
        async_path=False,
        check_timeout_s=5.0,
        budget=budget,
    )
    assert len(results) == len(journal.checks)
    assert all(r.status == "failed" for r in results)
    assert all("not started: the run's limit" in (r.error or "") for r in results)
