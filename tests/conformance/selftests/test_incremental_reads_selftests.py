"""C4 self-tests of the incremental-reads suite (X10): wrong ``load_since`` cursors.

Both broken stores are the real MemoryStore with one plausible cursor bug; no
other suite polls ``load_since`` at all.
"""

from __future__ import annotations

from typing import Final

import pytest

from rulvar_store import MemoryStore
from tests.conformance.selftests._broken_memory_races import memory_locations
from tests.conformance.selftests._broken_reads import (
    IncarnationBlindCursor,
    LengthReadAfterEntries,
)
from tests.conformance.selftests._support import FULL, failure_of

SUITE: Final = "incremental-reads"

CASES: Final = [
    ("load-since-across-incarnations", IncarnationBlindCursor, "without restarted"),
    ("load-since-concurrent-appends", LengthReadAfterEntries, "skipped"),
]

SELF_TESTED: frozenset[str] = frozenset(
    {"load-since-across-incarnations", "load-since-concurrent-appends"}
)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"),
    CASES,
    ids=[f"{check}-{broken.__name__}" for check, broken, _ in CASES],
)
def test_broken_cursor_fails_the_named_check(
    check_id: str, broken: type[MemoryStore], says: str
) -> None:
    detail = failure_of(memory_locations(broken), SUITE, check_id)
    assert says in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_memory_store_passes() -> None:
    from rulvar_conformance import Certification, certification_suites

    (built,) = certification_suites(
        Certification(memory_locations(MemoryStore), FULL), [SUITE]
    )
    built.run()


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    assert frozenset(check for check, _, _ in CASES) == SELF_TESTED
