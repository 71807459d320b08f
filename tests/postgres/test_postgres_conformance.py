"""The conformance kit over PostgresStore: journal, leasable, fenced writes and blobs.

Every ``mk`` call opens a store in its OWN new schema (C1); the stores are closed
and the schemas dropped when the check ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from rulvar_conformance import (
    ExpiryPairing,
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
    fenced_writes_conformance,
    journal_store_conformance,
    leasable_store_conformance,
    pytest_params,
)
from rulvar_conformance.harness.kit import ConformanceCheck
from rulvar_store_postgres import PostgresStore

pytestmark = pytest.mark.postgres

LONG_TTL_MS = 600_000  # no stall can cross it: leases go stale by release only
EXPIRY_TTL_MS = 1_200  # the one wall-clock check (8.3: 1200 for Postgres)


class _FreshStores:
    """Bound to a test by the autouse fixture below; suites are built at import."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.new_schema: Callable[[], str] | None = None
        self.stores: list[PostgresStore] = []

    def __call__(self, ttl_ms: int = 60_000) -> PostgresStore:
        if self.url is None or self.new_schema is None:
            raise RuntimeError("a kit factory was called outside a test")
        store = PostgresStore(self.url, schema=self.new_schema(), ttl_ms=ttl_ms)
        self.stores.append(store)
        return store

    def close_all(self) -> None:
        for store in self.stores:
            store.close()
        self.stores.clear()


FRESH = _FreshStores()


def _pair() -> FencedTranscriptsFixture:
    store = FRESH()
    return FencedTranscriptsFixture(journal=store, transcripts=store.transcripts())


SUITES = {
    "journal": journal_store_conformance(FRESH),
    "leasable": leasable_store_conformance(
        lambda: FRESH(LONG_TTL_MS),
        expiry=ExpiryPairing(EXPIRY_TTL_MS, lambda: FRESH(EXPIRY_TTL_MS)),
    ),
    "fenced-writes": fenced_writes_conformance(FRESH),
    "fenced-transcripts": fenced_transcripts_conformance(_pair),
}


@pytest.fixture(autouse=True)
def _bind_fresh(pg_url: str, new_schema: Callable[[], str]) -> Iterator[None]:
    FRESH.url, FRESH.new_schema = pg_url, new_schema
    try:
        yield
    finally:
        FRESH.close_all()  # before new_schema's teardown drops the schemas
        FRESH.url = FRESH.new_schema = None


@pytest.mark.parametrize("check", pytest_params(SUITES["journal"]))
def test_journal_store_conformance(check: ConformanceCheck) -> None:
    """PostgresStore passes every journal check (J1-J7, M1-M6) of the kit."""
    check.run()


@pytest.mark.parametrize("check", pytest_params(SUITES["leasable"]))
def test_leasable_store_conformance(check: ConformanceCheck) -> None:
    """PostgresStore passes every lease check (L1-L8), expiry at ttl 1200 ms."""
    check.run()


@pytest.mark.parametrize("check", pytest_params(SUITES["fenced-writes"]))
def test_fenced_writes_conformance(check: ConformanceCheck) -> None:
    """PostgresStore's fenced marker holds: stale meta/delete writes bounce (F1-F5)."""
    check.run()


@pytest.mark.parametrize("check", pytest_params(SUITES["fenced-transcripts"]))
def test_fenced_transcripts_conformance(check: ConformanceCheck) -> None:
    """The transcripts() twin fences blob puts and deletes in the same domain (T6)."""
    check.run()
