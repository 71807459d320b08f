"""C4 self-test of the typed-errors suite: a raw driver busy error fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.selftests._support import broken_locations, failure_of

SELF_TESTED: frozenset[str] = frozenset({"contention-is-store-busy"})


@pytest.mark.clause("C4")
def test_raw_driver_busy_error_fails_contention_is_store_busy(tmp_path: Path) -> None:
    """apsw.BusyError escaping the SPI is named, with where it came from."""
    detail = failure_of(
        broken_locations("RawBusyError", tmp_path),
        "typed-errors",
        "contention-is-store-busy",
    )
    assert "observed apsw.BusyError" in detail
