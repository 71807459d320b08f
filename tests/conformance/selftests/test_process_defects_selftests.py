"""C4 self-tests: a lock or a clock kept per process fails the two-process check.

Issue 22 item 5. ``SkewedProcessClock`` adds a per-process offset to the
declared clock: handles of one interpreter agree, a spawned child (offset 0)
does not. ``ProcessLocalWriteLock`` (a threading lock standing in for BEGIN
IMMEDIATE) is proven in test_process_window_selftests.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from tests.conformance.selftests._broken_processes import SkewedProcessClock
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

SELF_TESTED: frozenset[str] = frozenset({"two-handles-across-processes"})

AN_HOUR_MS: Final = 3_600_000


@pytest.mark.clause("C4")
def test_a_per_process_clock_fails_the_two_process_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's clock runs an hour ahead: the child's live lease looks expired."""
    monkeypatch.setattr(SkewedProcessClock, "skew_ms", AN_HOUR_MS)
    detail = failure_of(
        sqlite_locations(SkewedProcessClock, tmp_path),
        "two-handles",
        "two-handles-across-processes",
    )
    assert "a child process holds" in detail, detail


IN_PROCESS: Final = (
    "two-handles-exclusive-acquire",
    "two-handles-epochs-interleaved",
)


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", IN_PROCESS)
def test_a_per_process_clock_passes_the_in_process_checks(
    check_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why a second process is needed: every handle here reads the same skew."""
    monkeypatch.setattr(SkewedProcessClock, "skew_ms", AN_HOUR_MS)
    (suite,) = certification_suites(
        Certification(sqlite_locations(SkewedProcessClock, tmp_path), FULL),
        ["two-handles"],
    )
    suite.check(check_id).run()
