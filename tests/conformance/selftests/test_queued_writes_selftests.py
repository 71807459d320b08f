"""C4 self-tests of the queued-writes suite (Q19): each seeded queueing defect is caught.

Every broken store is the real SqliteStore with one piece of its queued puts
wrong (``_broken_queued``); the honest SQLite and PostgreSQL stores pass the
whole suite over the same kind of locations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store.backend import parse_store_url, resolve_backend
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests import _broken_queued as broken
from tests.conformance.selftests._broken_postgres import postgres_url
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SELF_TESTED: frozenset[str] = frozenset(
    {
        "queued-rides-next-put",
        "queued-keeps-order",
        "queued-flush-lands-now",
        "queued-awaited-is-landed",
        "queued-superseded-refused",
    }
)

CASES: Final = [
    ("queued-rides-next-put", broken.QueueKeptApart, "did not carry it"),
    ("queued-keeps-order", broken.ArrivalFirst, "landed after the later put"),
    ("queued-flush-lands-now", broken.FlushIgnored, "would miss it"),
    ("queued-awaited-is-landed", broken.AckedEarly, "acknowledged before it landed"),
    ("queued-superseded-refused", broken.UnfencedQueue, "not LeaseHeldError"),
]


def test_cases_cover_self_tested() -> None:
    """SELF_TESTED (a literal, for the meta-test) names exactly the checks CASES runs."""
    assert {check for check, _, _ in CASES} == SELF_TESTED


@pytest.mark.clause("C4")
@pytest.mark.clause("Q19")
@pytest.mark.parametrize(
    ("check_id", "store", "expected"),
    CASES,
    ids=[f"{check}-{store.__name__}" for check, store, _ in CASES],
)
def test_a_queueing_defect_fails_its_check(
    tmp_path: Path, check_id: str, store: type[SqliteStore], expected: str
) -> None:
    """Q19: the seeded defect is caught by the check written for it."""
    detail = failure_of(sqlite_locations(store, tmp_path), "queued-writes", check_id)
    assert expected in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_sqlite_store_passes_the_queued_writes_suite(tmp_path: Path) -> None:
    """No false positive: the real SqliteStore passes every check."""
    (suite,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), ["queued-writes"]
    )
    suite.run()


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_the_honest_postgres_store_passes_the_queued_writes_suite() -> None:
    """No false positive: PostgresStore's queued puts ride the next put of their lease."""
    parsed = parse_store_url(postgres_url())
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        (suite,) = certification_suites(
            Certification(locations, FULL), ["queued-writes"]
        )
        suite.run()
