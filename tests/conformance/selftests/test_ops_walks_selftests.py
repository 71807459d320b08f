"""C4 self-tests of the operator-tools walks (R5-R7): broken tools fail them.

Each slip replaces one step of the real tools in ``rulvar_store`` for one test
(``_broken_ops``): a pager that stops after its first full page, an audit that
takes a brief lease, a sweep that deletes without the lease it took. The
honest tools pass the same checks over the same SQLite locations.

White-box: rulvar_store._audit, rulvar_store._observe, rulvar_store._retention (where the broken steps are patched in)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from rulvar_store import _audit, _observe, _retention
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests._broken_ops import (
    audit_under_brief_lease,
    delete_without_lease,
    first_page_only,
)
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import check_result, failure_of

SELF_TESTED: frozenset[str] = frozenset(
    {
        "ops-listing-every-page",
        "ops-audit-takes-no-lease",
        "ops-sweep-deletes-under-its-lease",
    }
)

CASES: Final[list[tuple[str, Any, str, Callable[..., Any], str]]] = [
    ("ops-listing-every-page", _observe, "_paged", first_page_only, "(R5)"),
    (
        "ops-audit-takes-no-lease",
        _audit,
        "_audit_listed",
        audit_under_brief_lease,
        "(R6",
    ),
    (
        "ops-sweep-deletes-under-its-lease",
        _retention,
        "delete_run",
        delete_without_lease,
        "deleted the successor's run",
    ),
]


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "module", "name", "broken", "says"), CASES, ids=[c[0] for c in CASES]
)
def test_broken_tool_fails_the_named_check(
    check_id: str,
    module: Any,
    name: str,
    broken: Callable[..., Any],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each seeded slip in the tools fails its check over the honest store."""
    monkeypatch.setattr(module, name, broken)
    detail = failure_of(
        sqlite_locations(SqliteStore, tmp_path), "operator-tools", check_id
    )
    assert says in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", sorted(SELF_TESTED))
def test_the_honest_tools_pass(check_id: str, tmp_path: Path) -> None:
    """No false positive: the real tools over the real SqliteStore."""
    result = check_result(
        sqlite_locations(SqliteStore, tmp_path), "operator-tools", check_id
    )
    assert result.status == "passed", result.error
