"""C4 self-tests of the durability (X8) and next-op-sees (X9) suites.

Each broken store is the real SqliteStore with one bug that every other suite
passes: a group commit that answers callers before its COMMIT, one that reads a
run's lease row once per batch, and a connection tuned below its declared
``synchronous``. The honest store passes the same checks (no false positive).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_batching import (
    AcksBeforeCommit,
    LeaseRowOncePerBatch,
    SyncOffBehindTheDeclaration,
)
from tests.conformance.selftests._broken_durability import (
    BlobBatchAcksBeforeCommit,
    CloseAnswersQueuedDone,
)
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

CASES: Final = [
    (
        "durability",
        "ack-survives-sigkill",
        AcksBeforeCommit,
        "acknowledged appends missing",
    ),
    (
        "durability",
        "blob-ack-survives-sigkill",
        BlobBatchAcksBeforeCommit,
        "acknowledged blob-only batches missing",
    ),
    (
        "durability",
        "close-keeps-acknowledged",
        CloseAnswersQueuedDone,
        "close answered writes it dropped",
    ),
    (
        "durability",
        "durability-setting",
        SyncOffBehindTheDeclaration,
        "synchronous=OFF",
    ),
    ("next-op-sees", "next-op-sees-release", LeaseRowOncePerBatch, "sharing the batch"),
    ("next-op-sees", "next-op-sees-delete", LeaseRowOncePerBatch, "sharing the batch"),
    (
        "next-op-sees",
        "next-op-sees-takeover",
        LeaseRowOncePerBatch,
        "sharing the batch",
    ),
]

SELF_TESTED: frozenset[str] = frozenset(
    {
        "ack-survives-sigkill",
        "blob-ack-survives-sigkill",
        "close-keeps-acknowledged",
        "durability-setting",
        "next-op-sees-release",
        "next-op-sees-delete",
        "next-op-sees-takeover",
    }
)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("suite", "check_id", "broken", "says"),
    CASES,
    ids=[f"{check}-{broken.__name__}" for _, check, broken, _ in CASES],
)
def test_broken_store_fails_the_named_check(
    suite: str, check_id: str, broken: type[SqliteStore], says: str, tmp_path: Path
) -> None:
    """Each seeded defect fails its check every time (no race decides it)."""
    detail = failure_of(sqlite_locations(broken, tmp_path), suite, check_id)
    assert says in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.parametrize("suite", ["durability", "next-op-sees"])
def test_the_honest_store_passes_the_same_checks(suite: str, tmp_path: Path) -> None:
    """No false positive: the real SqliteStore through the same location factory."""
    (built,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), [suite]
    )
    built.run()


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists the checks CASES runs."""
    assert frozenset(check for _, check, _, _ in CASES) == SELF_TESTED
