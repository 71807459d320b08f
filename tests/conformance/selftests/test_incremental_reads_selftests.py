"""C4 self-tests of the incremental-reads suite (X10): wrong ``load_since`` cursors.

Both broken stores are the real MemoryStore with one plausible cursor bug; no
other suite polls ``load_since`` at all.
"""

from __future__ import annotations

from typing import Final

from tests.conformance.selftests._broken_reads import (
    IncarnationBlindCursor,
    LengthReadAfterEntries,
)
from tests.conformance.selftests._support import memory_store_self_tests

SUITE: Final = "incremental-reads"

CASES: Final = [
    ("load-since-across-incarnations", IncarnationBlindCursor, "without restarted"),
    ("load-since-concurrent-appends", LengthReadAfterEntries, "skipped"),
]

SELF_TESTED: frozenset[str] = frozenset(
    {"load-since-across-incarnations", "load-since-concurrent-appends"}
)


test_broken_store_fails_the_named_check, test_the_honest_memory_store_passes = (
    memory_store_self_tests(SUITE, CASES)
)


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    assert frozenset(check for check, _, _ in CASES) == SELF_TESTED
