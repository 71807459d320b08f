"""C4 self-tests on PostgreSQL: a cursor past in-flight appends, lease times on the client's clock.

``TableTopCursor`` fails ``load-since-in-flight-append`` (X10) and
``ClientClockLeases`` fails ``lease-times-on-server-clock`` (P5); the honest
PostgresStore passes both over the same kind of fresh schemas.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import psycopg
import pytest

from rulvar_store_postgres import PostgresStore
from tests.conformance.selftests._broken_pg_paths import (
    ClientClockLeases,
    TableTopCursor,
)
from tests.conformance.selftests._broken_postgres import postgres_url, schema_locations
from tests.conformance.selftests._support import check_result, failure_of

SELF_TESTED: frozenset[str] = frozenset(
    {"load-since-in-flight-append", "lease-times-on-server-clock"}
)

CASES: Final = [
    ("incremental-reads", "load-since-in-flight-append", TableTopCursor, "skipped"),
    ("server-clock", "lease-times-on-server-clock", ClientClockLeases, "(P5"),
]


@pytest.fixture
def made() -> Iterator[list[str]]:
    schemas: list[str] = []
    yield schemas
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("suite", "check_id", "broken", "says"), CASES, ids=[c[1] for c in CASES]
)
def test_broken_postgres_store_fails_the_named_check(
    suite: str, check_id: str, broken: type[PostgresStore], says: str, made: list[str]
) -> None:
    """Each seeded slip fails its check every time (no race decides it)."""
    locations, schemas = schema_locations(postgres_url(), broken, "rulvar_paths")
    try:
        detail = failure_of(locations, suite, check_id)
    finally:
        made.extend(schemas)
    assert says in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize(("suite", "check_id"), [c[:2] for c in CASES])
def test_the_honest_postgres_store_passes(
    suite: str, check_id: str, made: list[str]
) -> None:
    """No false positive: the real PostgresStore over the same kind of schemas."""
    locations, schemas = schema_locations(postgres_url(), PostgresStore, "rulvar_paths")
    try:
        result = check_result(locations, suite, check_id)
    finally:
        made.extend(schemas)
    assert result.status == "passed", result.error
