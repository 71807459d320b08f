"""C4 self-tests on PostgreSQL: a lease checked by its own query is caught there too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import psycopg
import pytest

from rulvar_conformance.harness.surfaces import SURFACES
from rulvar_store.backend import LocationFactory
from tests.conformance.selftests._broken_postgres import (
    postgres_locations,
    postgres_url,
)
from tests.conformance.selftests._support import failure_of, race_failure_of

DATA_SURFACES: Final = [s.name for s in SURFACES if not s.lease_row]
CASES: Final = [("forced-races", f"x3-window-{name}") for name in DATA_SURFACES] + [
    ("thread-races", f"race-{name}") for name in DATA_SURFACES
]

SELF_TESTED: frozenset[str] = frozenset(
    {
        "race-append",
        "race-blob-delete",
        "race-blob-put",
        "race-delete",
        "race-put-meta",
        "x3-window-append",
        "x3-window-blob-delete",
        "x3-window-blob-put",
        "x3-window-delete",
        "x3-window-put-meta",
    }
)


@pytest.fixture
def broken_schemas() -> Iterator[LocationFactory]:
    url = postgres_url()
    locations, made = postgres_locations(url)
    yield locations
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize(("suite", "check_id"), CASES, ids=[c for _, c in CASES])
def test_separate_fence_query_fails_the_window_and_race_checks(
    suite: str, check_id: str, broken_schemas: LocationFactory
) -> None:
    """A PostgresStore that checks the lease in its own query loses the race."""
    if suite == "thread-races":
        race_failure_of(lambda _run: broken_schemas, suite, check_id)
    else:
        failure_of(broken_schemas, suite, check_id)


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists the checks CASES runs."""
    assert frozenset(check for _, check in CASES) == SELF_TESTED
