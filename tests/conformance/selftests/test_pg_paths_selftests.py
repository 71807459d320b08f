"""C4 self-tests on PostgreSQL: a cursor past in-flight appends, lease times on the client's clock.

``TableTopCursor`` fails ``load-since-in-flight-append`` (X10) and
``ClientClockLeases`` fails ``lease-times-on-server-clock`` (P5); the honest
PostgresStore passes both over the same kind of fresh schemas. A pool that
hands a connection back past its waiters fails ``pool-fairness`` (P29), and a
prepared path that never prepares again fails ``forgotten-statements`` (P23),
sync and asyncio.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import psycopg
import pytest

from rulvar_store.backend import LocationFactory, parse_store_url, resolve_backend
from rulvar_store_postgres import PostgresStore, _calls
from rulvar_store_postgres._async_pool import AsyncStorePool
from rulvar_store_postgres._pool import StorePool
from tests.conformance.selftests._broken_pg_paths import (
    ClientClockLeases,
    TableTopCursor,
    async_return_idle_past_waiters,
    exchange_reprepares_without_settings,
    exchange_without_reprepare,
    return_idle_past_waiters,
)
from tests.conformance.selftests._broken_postgres import postgres_url, schema_locations
from tests.conformance.selftests._support import check_result, failure_of

SELF_TESTED: frozenset[str] = frozenset(
    {
        "load-since-in-flight-append",
        "lease-times-on-server-clock",
        "pool-serves-waiting-callers",
        "pool-serves-waiting-coroutines",
        "store-reprepares-forgotten",
        "async-store-reprepares-forgotten",
    }
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


@pytest.fixture
def url_locations() -> Iterator[LocationFactory]:
    """Fresh schemas by URL, as ``rulvar check`` makes them (the pool check opens by URL)."""
    parsed = parse_store_url(postgres_url())
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as factory:
        yield factory


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.clause("P29")
def test_a_hand_back_past_waiting_callers_fails_pool_fairness(
    url_locations: LocationFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P29: callers queued for the one connection time out beside it."""
    monkeypatch.setattr(StorePool, "return_idle", return_idle_past_waiters)
    detail = failure_of(url_locations, "pool-fairness", "pool-serves-waiting-callers")
    assert "(P29" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_the_honest_pool_serves_every_caller(url_locations: LocationFactory) -> None:
    """No false positive: the real pool over the same kind of locations."""
    result = check_result(url_locations, "pool-fairness", "pool-serves-waiting-callers")
    assert result.status == "passed", result.error


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.clause("P29")
def test_an_async_hand_back_past_waiting_tasks_fails_pool_fairness(
    url_locations: LocationFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P29: tasks queued for the one connection time out beside it."""
    monkeypatch.setattr(AsyncStorePool, "return_idle", async_return_idle_past_waiters)
    detail = failure_of(
        url_locations, "pool-fairness", "pool-serves-waiting-coroutines"
    )
    assert "(P29" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_the_honest_async_pool_serves_every_task(
    url_locations: LocationFactory,
) -> None:
    """No false positive: the real asyncio pool over the same kind of locations."""
    result = check_result(
        url_locations, "pool-fairness", "pool-serves-waiting-coroutines"
    )
    assert result.status == "passed", result.error


FORGOTTEN_CHECKS: Final = (
    "store-reprepares-forgotten",
    "async-store-reprepares-forgotten",
)


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.clause("P23")
@pytest.mark.parametrize("check_id", FORGOTTEN_CHECKS)
def test_a_prepared_path_that_never_reprepares_fails_forgotten_statements(
    check_id: str, url_locations: LocationFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P23: after DEALLOCATE ALL in the session the calls fail with 26000."""
    monkeypatch.setattr(_calls, "_exchange", exchange_without_reprepare)
    detail = failure_of(url_locations, "forgotten-statements", check_id)
    assert "(P23" in detail, detail
    assert "does not exist" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.clause("P24")
@pytest.mark.parametrize("check_id", FORGOTTEN_CHECKS)
def test_a_store_that_reprepares_but_keeps_a_reset_sessions_defaults_fails(
    check_id: str, url_locations: LocationFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P24: after DISCARD ALL the calls are served, but lock_timeout and the
    rest of the store's SETs are gone from the session."""
    monkeypatch.setattr(_calls, "_exchange", exchange_reprepares_without_settings)
    detail = failure_of(url_locations, "forgotten-statements", check_id)
    assert "(P24" in detail, detail
    assert "lock_timeout=" in detail, detail


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", FORGOTTEN_CHECKS)
def test_the_honest_store_reprepares_what_the_server_forgot(
    check_id: str, url_locations: LocationFactory
) -> None:
    """No false positive, and no pass without a forget: the real store over the proxy."""
    result = check_result(url_locations, "forgotten-statements", check_id)
    assert result.status == "passed", result.error
