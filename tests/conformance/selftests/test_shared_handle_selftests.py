"""C4 self-tests of the shared-handle suite: broken group commits of one SqliteStore.

Both broken stores are the real store with group commit on and one bug in how
a batch treats its operations; every other suite writes one thread per handle
and never sees a batch, so only these checks catch them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from tests.conformance.selftests._support import broken_locations, failure_of

SUITE: Final = "shared-handle"

CASES: Final = [
    ("shared-handle-own-outcomes", "FenceFirstOfBatch", "with a dead lease"),
    ("shared-handle-own-outcomes", "RefusalFailsBatch", "expected success"),
    ("shared-handle-takeover", "FenceFirstOfBatch", "superseded"),
    ("shared-handle-takeover", "RefusalFailsBatch", "to succeed"),
]

SELF_TESTED: frozenset[str] = frozenset(
    {"shared-handle-own-outcomes", "shared-handle-takeover"}
)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"), CASES, ids=[f"{c}-{b}" for c, b, _ in CASES]
)
def test_broken_group_commit_fails_the_named_check(
    check_id: str, broken: str, says: str, tmp_path: Path
) -> None:
    """A batch that fences one caller, or fails all for one refusal, is caught."""
    detail = failure_of(broken_locations(broken, tmp_path), SUITE, check_id)
    assert says in detail


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists the checks CASES runs."""
    assert frozenset(check for check, _, _ in CASES) == SELF_TESTED
