"""C4 self-tests of the operator-tools suite: stores the ops functions trip over."""

from __future__ import annotations

from typing import Final

from tests.conformance.selftests import _broken_memory_races, _broken_operator
from tests.conformance.selftests._support import memory_store_self_tests

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


test_broken_store_fails_the_named_check, test_the_honest_memory_store_passes = (
    memory_store_self_tests(SUITE, CASES)
)
