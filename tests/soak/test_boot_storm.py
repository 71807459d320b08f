"""S11: eight processes construct the store over one fresh location at once, twice."""

from __future__ import annotations

import pytest

from rulvar_conformance.soak.boot_storm import run_boot_storm
from rulvar_store.backend import LocationFactory


@pytest.mark.clause("S11")
def test_eight_processes_boot_one_fresh_sqlite_file_at_once(
    sqlite_locations: LocationFactory,
) -> None:
    """Every child opens the fresh file, reads, closes and exits 0, in both rounds."""
    result = run_boot_storm(sqlite_locations, processes=8, rounds=2, ttl_ms=250)
    assert result.failures == []
    assert len(result.round_ms) == 2


@pytest.mark.postgres
@pytest.mark.clause("S11")
def test_eight_processes_boot_one_fresh_postgres_schema_at_once(
    postgres_locations: LocationFactory,
) -> None:
    """Every child's lazy boot of the fresh schema (forced by get_meta) succeeds, twice."""
    result = run_boot_storm(postgres_locations, processes=8, rounds=2, ttl_ms=1200)
    assert result.failures == []
    assert len(result.round_ms) == 2
