"""Self-test: stores that split one mutation in two transactions fail the table.

The same rows pass for the honest SqliteStore opened the same way (the positive
control), so each failure is the break, not the harness.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance import Certification, ConformanceFailure, ConformanceSuite
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_store.backend import StoreLocation

HERE = str(Path(__file__).resolve().parent)


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Builds a kill-point suite over fresh files opened as ``BROKEN[kind]``."""
    monkeypatch.syspath_prepend(HERE)
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)  # the child imports broken_stores too
    import broken_stores  # type: ignore[import-not-found]  # on sys.path only here

    numbers = count()

    def suite(kind: str) -> ConformanceSuite:
        def fresh() -> StoreLocation:
            db = str(tmp_path / f"{kind}-{next(numbers)}.db")
            return StoreLocation(
                name=db, opener=broken_stores.BrokenOpener(db, kind), contention=True
            )

        return kill_point_conformance(Certification(fresh, frozenset({"leases"})))

    yield suite
    sys.modules.pop("broken_stores", None)


# For the C4 meta-test (tests/conformance/test_self_test_coverage.py).
SELF_TESTED = frozenset(
    {
        "kp-store-put-meta-after-commit",
        "kp-store-append-after-commit",
        "kp-store-delete-after-commit",
    }
)

CASES = [
    ("two-transaction-meta", "kp-store-put-meta-after-commit", "M2"),
    ("payload-after-seq", "kp-store-append-after-commit", "J1"),
    ("two-transaction-delete", "kp-store-delete-after-commit", "M6"),
]


@pytest.mark.clause("K9")
@pytest.mark.parametrize(
    ("kind", "check_id", "clause"), CASES, ids=[c[0] for c in CASES]
)
def test_a_mutation_split_in_two_transactions_fails_its_row(
    broken: Any, kind: str, check_id: str, clause: str
) -> None:
    """Death after the first of two commits leaves a half state: the row fails."""
    check = broken(kind).check(check_id)
    assert clause in check.clauses
    with pytest.raises(
        ConformanceFailure, match="must leave all of the operation visible, but left"
    ):
        check.run()


@pytest.mark.clause("K9")
@pytest.mark.parametrize("check_id", [c[1] for c in CASES])
def test_the_honest_store_passes_the_same_rows(broken: Any, check_id: str) -> None:
    """Positive control: the unbroken SqliteStore behind the same opener passes."""
    broken("honest").check(check_id).run()
