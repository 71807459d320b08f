"""C4 self-tests of the loop-health suite (Y6-Y8): broken asyncio stores fail it.

Each broken store is the real ``AsyncSqliteStore`` with one bug
(``_broken_async``); the honest native store passes the same checks over the
same locations (no false positive), and so does the kit's own opener (the
generic adapter over the sync store, as ``rulvar check`` runs the suite on a
non-URL location).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_conformance.suites.loop_health import loop_health_conformance
from rulvar_store_sqlite import SqliteStore, _group_commit
from tests.conformance.selftests._broken_async import native_opener, one_loop_wake
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL

SELF_TESTED: frozenset[str] = frozenset(
    {
        "async-loop-stall",
        "async-close-drains",
        "async-batch-many-loops",
        "async-load-since-after-delete",
    }
)

CHECKS: Final = sorted(SELF_TESTED)


def _failure(tmp_path: Path, check_id: str, broken: str | None) -> str:
    suite = loop_health_conformance(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL),
        native_opener(broken),
    )
    with pytest.raises(ConformanceFailure) as failed:
        suite.check(check_id).run()
    return failed.value.detail


@pytest.mark.clause("C4")
@pytest.mark.clause("Y6")
def test_a_read_inline_on_the_loop_behind_a_write_fails_the_stall_bound(
    tmp_path: Path,
) -> None:
    """Y6: the loop stalls for the held write's second; the row says how long."""
    detail = _failure(tmp_path, "async-loop-stall", "inline-read")
    assert "the event loop stalled" in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.clause("Y7")
def test_a_close_that_answers_queued_writes_done_fails_close_drains(
    tmp_path: Path,
) -> None:
    """Y7: writes queued at aclose() answered done are missing from the store."""
    detail = _failure(tmp_path, "async-close-drains", "close-answers-done")
    assert "not stored" in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.clause("Y8")
def test_a_batch_waking_every_coroutine_on_one_loop_fails_many_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Y8: the second loop's coroutines are never resumed on their own loop."""
    monkeypatch.setattr(_group_commit, "_wake_decided", one_loop_wake)
    detail = _failure(tmp_path, "async-batch-many-loops", None)
    assert "not resumed on their own loop" in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", CHECKS)
def test_the_honest_async_store_passes(check_id: str, tmp_path: Path) -> None:
    """No false positive: the real AsyncSqliteStore over the same locations."""
    suite = loop_health_conformance(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), native_opener()
    )
    suite.check(check_id).run()


@pytest.mark.clause("C4")
@pytest.mark.clause("Y9")
def test_an_async_load_since_with_a_count_cursor_fails_after_delete(
    tmp_path: Path,
) -> None:
    """Y9: the re-created run's journal comes back as a tail, without restarted."""
    detail = _failure(tmp_path, "async-load-since-after-delete", "count-cursor")
    assert "(Y9" in detail, detail
    assert "restarted=False" in detail, detail
