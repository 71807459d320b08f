"""C4 self-tests of the worker-life suite: a refusal without its expiry, a dead
holder never judged dead, a stopped holder judged dead.

White-box: rulvar_store._memory (the memory variant reuses its lease rows) and
SqliteStore._holder_is_dead (the SQLite variants override the verdict only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store import Lease, LeaseHeldError
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_liveness import (
    NeverJudgesDead,
    StoppedCountsAsDead,
)
from tests.conformance.selftests._broken_memory import Handle, self_tests
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SUITE: Final = "worker-life"


class RefusalWithoutExpiry(Handle):
    """acquire refuses a live lease without saying who holds it or until when."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self.domain.lock:
            row = self.row(run_id)
            if row is not None and row.expires_at > self.now():
                raise LeaseHeldError(
                    f"run {run_id!r} is leased", run_id, None, row.epoch
                )
        return self.inner.acquire(run_id, owner)


SELF_TESTED: Final = frozenset({"refusal-names-the-holder", "dead-holder-taken-over"})

test_broken_store_fails_the_named_check, test_honest_handle_passes = self_tests(
    [(RefusalWithoutExpiry, SUITE, "refusal-names-the-holder")],
    "refusal without the holder's expiry",
)


@pytest.mark.clause("C4")
def test_a_store_that_never_judges_a_holder_dead_fails_the_takeover_check(
    tmp_path: Path,
) -> None:
    """L11: the SIGKILLed child's live lease blocks until its ttl, past the bound."""
    detail = failure_of(
        sqlite_locations(NeverJudgesDead, tmp_path), SUITE, "dead-holder-taken-over"
    )
    assert "SIGKILLed holder still blocks" in detail, detail


@pytest.mark.clause("C4")
def test_a_store_that_judges_a_stopped_holder_dead_fails_the_takeover_check(
    tmp_path: Path,
) -> None:
    """L11: a SIGSTOPped child is alive; taking its lease is the failure."""
    detail = failure_of(
        sqlite_locations(StoppedCountsAsDead, tmp_path),
        SUITE,
        "dead-holder-taken-over",
    )
    assert "a paused holder is alive" in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_sqlite_store_passes_the_takeover_check(tmp_path: Path) -> None:
    """Control: the real verdict passes, so the check can tell them apart."""
    (suite,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), [SUITE]
    )
    suite.check("dead-holder-taken-over").run()
