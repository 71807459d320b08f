"""C4 self-tests: per-process state standing in for shared state fails the two-process check.

``ProcessLocalLeases`` (a lease table in process memory) is proven in
test_two_handles_selftests.py; here the epoch counter kept in one process.
Both pass every check whose handles share one interpreter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_processes import (
    CheckThenCreateBoot,
    ProcessLocalEpochs,
)
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SELF_TESTED: frozenset[str] = frozenset(
    {"two-handles-across-processes", "boot-concurrent-first-opens"}
)


@pytest.mark.clause("C4")
def test_process_local_epochs_fail_the_two_process_check(tmp_path: Path) -> None:
    detail = failure_of(
        sqlite_locations(ProcessLocalEpochs, tmp_path),
        "two-handles",
        "two-handles-across-processes",
    )
    assert "epoch above" in detail, detail


IN_PROCESS: Final = ("two-handles-epochs-interleaved", "two-handles-exclusive-acquire")


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", IN_PROCESS)
def test_process_local_epochs_pass_the_in_process_checks(
    check_id: str, tmp_path: Path
) -> None:
    """Why a second process is needed: handles of one interpreter share the counter."""
    (suite,) = certification_suites(
        Certification(sqlite_locations(ProcessLocalEpochs, tmp_path), FULL),
        ["two-handles"],
    )
    suite.check(check_id).run()


@pytest.mark.clause("C4")
def test_check_then_create_boot_fails_concurrent_first_opens(tmp_path: Path) -> None:
    """Class 6: a bootstrap that is safe only when nothing races its first open."""
    detail = failure_of(
        sqlite_locations(CheckThenCreateBoot, tmp_path),
        "first-opens",
        "boot-concurrent-first-opens",
    )
    assert "first migration failed" in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_store_boots_under_concurrent_first_opens(tmp_path: Path) -> None:
    (suite,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), ["first-opens"]
    )
    suite.run()
