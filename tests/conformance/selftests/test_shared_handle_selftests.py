"""C4 self-tests of the shared-handle suite: broken group commits of one SqliteStore.

Both broken stores are the real store with group commit on and one bug in how
a batch treats its operations; every other suite writes one thread per handle
and never sees a batch, so only these checks catch them.
"""

from __future__ import annotations

from typing import Final

from tests.conformance.selftests._support import broken_store_self_tests

BUG: Final = "A batch that fences one caller, or fails all for one refusal, is caught."
"""What the broken stores get wrong (the docstring of their test)."""
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


(
    test_broken_store_fails_the_named_check,
    test_self_tested_names_exactly_the_checks_exercised_here,
) = broken_store_self_tests(SUITE, CASES, SELF_TESTED, BUG)
