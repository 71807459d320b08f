"""C4 self-test of the replaced-file suite (Q18): a one-time identity check fails it.

``FileIdentityCheckedOnce`` is the real SqliteStore whose door checks that the
path still names its database file at the first write only; the honest store
passes the same check over the same locations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_durability import FileIdentityCheckedOnce
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SELF_TESTED: frozenset[str] = frozenset({"file-replaced-every-write"})


@pytest.mark.clause("C4")
@pytest.mark.clause("Q18")
def test_an_identity_checked_once_fails_the_replaced_file_check(tmp_path: Path) -> None:
    """Q18: after the file is replaced, the next write goes through: caught."""
    detail = failure_of(
        sqlite_locations(FileIdentityCheckedOnce, tmp_path),
        "replaced-file",
        "file-replaced-every-write",
    )
    assert "is not checked on every write" in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_store_passes_the_replaced_file_check(tmp_path: Path) -> None:
    """No false positive: the real SqliteStore."""
    (suite,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), ["replaced-file"]
    )
    suite.run()
