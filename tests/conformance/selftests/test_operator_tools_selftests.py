"""C4 self-tests of the operator-tools suite: stores the ops functions trip over."""

from __future__ import annotations

from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store import MemoryStore
from tests.conformance.selftests import _broken_memory_races, _broken_operator
from tests.conformance.selftests._broken_memory_races import memory_locations
from tests.conformance.selftests._support import FULL, failure_of

SUITE: Final = "operator-tools"

CASES: Final = [
    ("ops-audit-read-only", _broken_operator.ReadStampsMeta, "(A2: read-only)"),
    (
        "ops-sweep-skips-live-owner",
        _broken_operator.PrefixListRefs,
        "'ops-free': 'refused'",
    ),
    ("ops-prune-unreferenced", _broken_operator.PrefixBlobDelete, "(R2)"),
    (
        "ops-repair-sound-under-lease",
        _broken_operator.MetaDropsUnknownKeys,
        "keeping every other key",
    ),
    (
        "ops-repair-sound-under-lease",
        _broken_memory_races.UnfencedMetaAndBlobs,
        "superseded lease",
    ),
    (
        "ops-stale-lease-changes-nothing",
        _broken_memory_races.UnfencedMetaAndBlobs,
        "superseded lease",
    ),
]

SELF_TESTED: frozenset[str] = frozenset(check for check, _, _ in CASES)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken", "says"),
    CASES,
    ids=[f"{check}-{broken.__name__}" for check, broken, _ in CASES],
)
def test_broken_store_fails_the_named_check(
    check_id: str, broken: type[MemoryStore], says: str
) -> None:
    detail = failure_of(memory_locations(broken), SUITE, check_id)
    assert says in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_memory_store_passes() -> None:
    (built,) = certification_suites(
        Certification(memory_locations(MemoryStore), FULL), [SUITE]
    )
    built.run()
