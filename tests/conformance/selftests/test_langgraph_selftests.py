"""C4 self-tests of the langgraph suite's surface checks: broken savers fail them.

Each broken saver (``_broken_surface_savers``) is the real ``RulvarSaver`` with one
slip, run through the check over real SQLite files; the honest saver passes
every surface check over the same locations (no false positive).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification
from rulvar_conformance.harness.kit import ConformanceFailure, build_check
from rulvar_conformance.suites import _langgraph_runs, langgraph_ownership
from rulvar_conformance.suites._langgraph_surfaces import SURFACE_CHECKS, SaverType
from rulvar_conformance.suites.langgraph import langgraph_conformance
from rulvar_langgraph import RulvarSaver
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_brief_put import (
    BriefPutIgnoresLiveLease,
    BriefPutIgnoresNeedPrior,
)
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._broken_surface_savers import (
    AsyncListIgnoresBefore,
    CurrentLayoutDelete,
    FilterAfterLimit,
    FreshStartOnGone,
    HoldReleasedAtOnce,
    ListingLatest,
    MetaOutsideLease,
    OrderedByTaskId,
    PruneKeepsBlobs,
    RetakingHold,
    RetryOnRefusal,
    SpecialWritesKeepFirst,
    SubgraphOutsideLease,
    UnfencedDeleteThread,
)
from tests.conformance.selftests._support import FULL

SELF_TESTED: frozenset[str] = frozenset(
    {
        "lg-list-filter-then-limit",
        "lg-special-writes-replace",
        "lg-pending-writes-order",
        "lg-refused-put-leaves-no-meta",
        "lg-delete-thread-every-layout",
        "lg-renewer-stops-when-lost",
        # the ownership checks and LangGraph's own suite, further down
        "lg-superseded-holder-refused",
        "lg-brief-lease-refused-while-held",
        "lg-zombie-stalled-node",
        "lg-late-write-after-delete",
        "lg-no-silent-reacquire",
        "lg-one-of-two-concurrent",
        "lg-subgraph-writes-fenced",
        "lg-unheld-late-write-after-delete",
        "lg-latest-read-is-flat",
        "lg-space-reclaimed",
        "lg-langgraph-conformance",
    }
)

CASES: Final = [
    (
        "lg-list-filter-then-limit",
        FilterAfterLimit,
        "the filter applies before the limit",
    ),
    (
        "lg-special-writes-replace",
        SpecialWritesKeepFirst,
        "replaces the task's earlier",
    ),
    ("lg-pending-writes-order", OrderedByTaskId, "(task_path, task_id, idx)"),
    ("lg-refused-put-leaves-no-meta", MetaOutsideLease, "listed again"),
    ("lg-delete-thread-every-layout", CurrentLayoutDelete, "earlier layouts included"),
    ("lg-renewer-stops-when-lost", RetakingHold, "took the thread back"),
]


def _check(check_id: str, saver_type: SaverType, tmp_path: Path) -> None:
    (row,) = [row for row in SURFACE_CHECKS if row[0] == check_id]
    _, title, clauses, body = row
    locations = sqlite_locations(SqliteStore, tmp_path)
    build_check(check_id, title, clauses, lambda: body(locations, saver_type)).run()


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"), CASES, ids=[case[0] for case in CASES]
)
def test_broken_saver_fails_the_named_check(
    check_id: str,
    broken: SaverType,
    says: str,
    tmp_path: Path,
) -> None:
    """Each seeded slip fails its check, every time (no race decides it)."""
    with pytest.raises(ConformanceFailure) as failed:
        _check(check_id, broken, tmp_path)
    assert says in failed.value.detail, failed.value.detail


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", [case[0] for case in CASES])
def test_the_honest_saver_passes(check_id: str, tmp_path: Path) -> None:
    """No false positive: RulvarSaver over the same SQLite locations."""
    _check(check_id, RulvarSaver, tmp_path)


# -- the ownership checks and LangGraph's own suite -----------------------------------

OWNERSHIP_CASES: Final = [
    ("lg-superseded-holder-refused", UnfencedDeleteThread, "delete_thread"),
    ("lg-brief-lease-refused-while-held", UnfencedDeleteThread, "delete_thread"),
    ("lg-zombie-stalled-node", RetryOnRefusal, ""),
    ("lg-late-write-after-delete", RetryOnRefusal, ""),
    ("lg-no-silent-reacquire", RetryOnRefusal, ""),
    ("lg-one-of-two-concurrent", HoldReleasedAtOnce, ""),
    ("lg-subgraph-writes-fenced", SubgraphOutsideLease, ""),
    ("lg-unheld-late-write-after-delete", FreshStartOnGone, ""),
    ("lg-latest-read-is-flat", ListingLatest, ""),
    ("lg-space-reclaimed", PruneKeepsBlobs, ""),
]
OWNERSHIP_SELF_TESTED: Final = frozenset(case[0] for case in OWNERSHIP_CASES)


def _ownership_check(
    check_id: str, tmp_path: Path, store_type: type[SqliteStore] = SqliteStore
) -> None:
    (check,) = [
        check
        for check in langgraph_conformance(
            Certification(sqlite_locations(store_type, tmp_path), FULL)
        ).checks
        if check.id == check_id
    ]
    check.run()


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"),
    OWNERSHIP_CASES,
    ids=[f"{case[0]}-{case[1].__name__}" for case in OWNERSHIP_CASES],
)
def test_broken_saver_fails_the_ownership_check(
    check_id: str,
    broken: SaverType,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each seeded slip, put over every worker's handle, fails its ownership check."""
    monkeypatch.setattr(langgraph_ownership, "SAVER_TYPE", broken)
    with pytest.raises(ConformanceFailure) as failed:
        _ownership_check(check_id, tmp_path)
    assert says in failed.value.detail, failed.value.detail


# An unheld put over SQLite is one brief_put (L16): a slip in the store's path
# is caught by the same ownership checks, the saver itself honest.
STORE_CASES: Final = [
    (
        "lg-brief-lease-refused-while-held",
        BriefPutIgnoresLiveLease,
        "another worker's unheld put",
    ),
    ("lg-unheld-late-write-after-delete", BriefPutIgnoresNeedPrior, "ThreadGoneError"),
]


@pytest.mark.clause("C4", "L16")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"),
    STORE_CASES,
    ids=[f"{case[0]}-{case[1].__name__}" for case in STORE_CASES],
)
def test_a_broken_brief_put_fails_the_ownership_check(
    check_id: str, broken: type[SqliteStore], says: str, tmp_path: Path
) -> None:
    with pytest.raises(ConformanceFailure) as failed:
        _ownership_check(check_id, tmp_path, broken)
    assert says in failed.value.detail, failed.value.detail


@pytest.mark.clause("C4")
@pytest.mark.clause("G12")
def test_a_list_that_ignores_before_fails_langgraph_conformance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G12: LangGraph's own suite, run by the kit, fails an alist(before=) slip."""
    monkeypatch.setattr(_langgraph_runs, "ASYNC_SAVER_TYPE", AsyncListIgnoresBefore)
    with pytest.raises(ConformanceFailure) as failed:
        _ownership_check("lg-langgraph-conformance", tmp_path)
    assert "LangGraph's conformance suite failed" in failed.value.detail


def test_self_tested_names_exactly_the_cases_run_here() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists every case of this module."""
    assert (
        frozenset(case[0] for case in CASES)
        | OWNERSHIP_SELF_TESTED
        | {"lg-langgraph-conformance"}
        == SELF_TESTED
    )
