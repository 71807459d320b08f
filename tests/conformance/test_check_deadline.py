"""No check can hang: a store that never answers fails its checks, and the run goes on.

``NeverHandsOn`` is the real SQLite store with a group commit whose first leader
keeps leadership: its second write waits forever. Under a short deadline each
check fails as "did not finish", with the stuck thread's stack pointing into
the group commit, and the next check still runs and is reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_conformance import (
    Certification,
    ConformanceSuite,
    certification_suites,
    run_suites,
)
from rulvar_conformance.harness.certify import stuck_threads
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
