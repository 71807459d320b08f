"""C4 self-tests of the LangGraph write-orders suite: seeded broken savers fail it.

Each broken saver (``_broken_savers``) keeps one thing between calls wrong: a
hold cache that assumes writes come after puts (issue 39), integer-only channel
versions, a hold's memory kept across holds, memory answering for another
checkpoint, an asyncio saver whose concurrent tasks race its memory. Every
check of the suite is failed by at least one of them, and the honest savers
pass every check (``tests/langgraph/test_orders_suite.py``, every backend).

Its checks run in the registered ``langgraph`` suite, so ``SELF_TESTED`` names
them for the registry's meta-test; it is also checked here against the suite's
own check list.
"""

from __future__ import annotations

from typing import Final

import pytest

from rulvar_conformance import Certification, CheckNotRun, ConformanceFailure
from rulvar_conformance.suites.langgraph_orders import langgraph_orders_conformance
from rulvar_store import MemoryStore
from rulvar_store.backend import StoreLocation
from tests.conformance.selftests._broken_memory_races import memory_locations
from tests.conformance.selftests._broken_savers import BROKEN_SAVERS, broken_savers

SELF_TESTED: frozenset[str] = frozenset(
    {
        "lg-orders-issue-order",
        "lg-orders-late-earlier-writes",
        "lg-orders-adversarial",
        "lg-orders-real-graph",
        "lg-orders-concurrent",
        "lg-orders-hold-to-hold",
        "lg-orders-right-checkpoint",
        "lg-orders-string-versions",
    }
)
"""The checks CASES proves (a literal: the meta-test reads it without running)."""

CASES: Final = [
    ("lg-orders-issue-order", "OrderAssuming"),
    ("lg-orders-late-earlier-writes", "OrderAssuming"),
    ("lg-orders-adversarial", "OrderAssuming"),
    ("lg-orders-real-graph", "OrderAssuming"),
    ("lg-orders-concurrent", "UnlockedAsync"),
    ("lg-orders-hold-to-hold", "KeptAcrossHolds"),
    ("lg-orders-right-checkpoint", "WrongCheckpoint"),
    ("lg-orders-string-versions", "IntegerVersions"),
]

ORDERS_SELF_TESTED: Final = frozenset(check for check, _ in CASES)


def test_self_tested_lists_the_cases() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists the checks CASES runs."""
    assert ORDERS_SELF_TESTED == SELF_TESTED


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken"), CASES, ids=[f"{c}-{b}" for c, b in CASES]
)
def test_broken_saver_fails_the_named_check(check_id: str, broken: str) -> None:
    """The seeded defect is caught by the check written for it."""
    suite = langgraph_orders_conformance(
        Certification(memory_locations(MemoryStore), frozenset({"leases"})),
        broken_savers(broken),
    )
    try:
        suite.check(check_id).run()
    except CheckNotRun as skipped:
        raise AssertionError(f"{check_id} did not run: {skipped.reason}") from None
    except ConformanceFailure as failure:
        caught = failure
    else:
        raise AssertionError(f"{check_id} passed against {broken}")
    assert caught.check_id == check_id


def test_every_check_of_the_suite_is_self_tested() -> None:
    """No write-orders check lacks a broken saver, and no case names a missing one."""
    suite = langgraph_orders_conformance(
        Certification(_never_opened, frozenset({"leases"}))
    )
    assert {check.id for check in suite.checks} == ORDERS_SELF_TESTED
    assert {broken for _, broken in CASES} == set(BROKEN_SAVERS)
