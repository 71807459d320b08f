"""V12 self-tests of the moving suite: broken movers fail the named check, honest ones pass."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from tests.conformance.selftests import _broken_moving
from tests.conformance.selftests._broken_memory_races import memory_locations
from tests.conformance.selftests._support import check_result, failure_of

SUITE: Final = "moving"

CASES: Final = [
    ("move-epoch-carried", _broken_moving.EpochFloorIgnored, "epoch was not carried"),
    ("move-epoch-carried", _broken_moving.GroupDropsEpochs, "after a grouped copy"),
    ("move-source-fenced", _broken_moving.TombstoneReleases, "not RunMovedError"),
    (
        "move-interrupted-resumed",
        _broken_moving.EntryRowsSkipOnLaterPages,
        "2499 of 2500",
    ),
]

SELF_TESTED: frozenset[str] = frozenset(check for check, _, _ in CASES)


@pytest.mark.clause("V12")
@pytest.mark.parametrize(
    ("check_id", "broken", "expected"),
    CASES,
    ids=[f"{c[0]}-{c[1].__name__}" for c in CASES],
)
def test_a_broken_mover_fails_the_named_check_V12(
    check_id: str, broken: type, expected: str
) -> None:
    """V12: each seeded defect fails exactly the check aimed at it, saying why."""
    detail = failure_of(memory_locations(broken), SUITE, check_id)
    assert expected in detail


@pytest.mark.clause("V12")
@pytest.mark.parametrize("check_id", sorted(SELF_TESTED))
def test_the_honest_stores_pass_the_moving_checks_V12(
    check_id: str, tmp_path: Path
) -> None:
    """V12: the memory and SQLite stores, honest, pass every moving check."""
    from rulvar_store import MemoryStore
    from rulvar_store_sqlite import SqliteStore
    from tests.conformance.selftests._broken_sqlite import sqlite_locations

    for locations in (
        memory_locations(MemoryStore),
        sqlite_locations(SqliteStore, tmp_path),
    ):
        result = check_result(locations, SUITE, check_id)
        assert result.status == "passed", result
