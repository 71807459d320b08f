"""C4 self-tests of X11 and X12: exclusion kept per process, lock keys blind to the location.

``ProcessLocalWriteLock`` (SQLite: a threading lock over a deferred BEGIN) and
``ProcessHashLockKey`` (PostgreSQL: a run lock keyed by Python's randomized
``hash()``) pass every check whose handles share one interpreter; the window a
child process holds open shows them. ``SchemaBlindLockKey`` (PostgreSQL: the
run lock leaves out the schema) passes every check at one location; a window
held at one schema holds up the same run id at another.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psycopg
import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store.backend import LocationFactory
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_pg_locks import (
    ProcessHashLockKey,
    SchemaBlindLockKey,
    pg_lock_locations,
)
from tests.conformance.selftests._broken_postgres import postgres_url
from tests.conformance.selftests._broken_processes import ProcessLocalWriteLock
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SUITE: Final = "forced-races"
ACROSS: Final = "x3-window-across-processes"
LOCATIONS: Final = "x11-locations-independent"
SELF_TESTED: frozenset[str] = frozenset({ACROSS, LOCATIONS})


def _passes(locations: LocationFactory, check_id: str) -> None:
    (suite,) = certification_suites(Certification(locations, FULL), [SUITE])
    suite.check(check_id).run()


@pytest.mark.clause("C4")
def test_a_process_local_write_lock_fails_the_cross_process_window(
    tmp_path: Path,
) -> None:
    detail = failure_of(
        sqlite_locations(ProcessLocalWriteLock, tmp_path), SUITE, ACROSS
    )
    assert "from another process" in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", [ACROSS, LOCATIONS])
def test_the_honest_sqlite_store_passes(check_id: str, tmp_path: Path) -> None:
    _passes(sqlite_locations(SqliteStore, tmp_path), check_id)


@pytest.fixture
def pg_url() -> str:
    return postgres_url()


def _dropping(url: str, made: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def process_hash(pg_url: str) -> Iterator[LocationFactory]:
    locations, made = pg_lock_locations(pg_url, ProcessHashLockKey)
    yield locations
    _dropping(pg_url, made)


@pytest.fixture
def schema_blind(pg_url: str) -> Iterator[LocationFactory]:
    locations, made = pg_lock_locations(pg_url, SchemaBlindLockKey)
    yield locations
    _dropping(pg_url, made)


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_a_per_process_lock_key_fails_the_cross_process_window(
    process_hash: LocationFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fixed PYTHONHASHSEED would give the child this process's hash(); unset,
    # the spawned child draws its own, as separate worker processes do.
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    detail = failure_of(process_hash, SUITE, ACROSS)
    assert "from another process" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", ["x3-window-append", "x3-window-release"])
def test_a_per_process_lock_key_passes_the_in_process_windows(
    check_id: str, process_hash: LocationFactory
) -> None:
    """Why a second process is needed: one interpreter's hash() agrees with itself."""
    _passes(process_hash, check_id)


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_a_schema_blind_lock_key_fails_locations_independent(
    schema_blind: LocationFactory,
) -> None:
    detail = failure_of(schema_blind, SUITE, LOCATIONS)
    assert "share a lock (X11)" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", [ACROSS, "x3-window-append"])
def test_a_schema_blind_lock_key_passes_at_one_location(
    check_id: str, schema_blind: LocationFactory
) -> None:
    """Why a second location is needed: at one schema the blind key still excludes."""
    _passes(schema_blind, check_id)
