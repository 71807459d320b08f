"""C4 self-tests of the two-handles suite: each check fails on a store with its bug."""

from __future__ import annotations

from typing import Final

from tests.conformance.selftests._support import broken_store_self_tests

BUG: Final = "A real store with one plausible bug fails the check written for that bug."
"""What the broken stores get wrong (the docstring of their test)."""
SUITE: Final = "two-handles"

# (check id, broken store class, a phrase the failure must contain)
CASES: Final = [
    ("two-handles-exclusive-acquire", "PerHandleLeases", "exactly one of two"),
    ("two-handles-exclusive-acquire", "AcquireCheckBeforeBegin", "exactly one of two"),
    ("two-handles-epochs-concurrent", "AcquireCheckThenUnlock", "L1, L2)"),
    ("two-handles-epochs-interleaved", "PerHandleEpochs", "expected an epoch above"),
    ("two-handles-epochs-concurrent", "EpochReadBeforeBegin", "L2, L3)"),
    ("two-handles-epochs-concurrent", "EpochReadThenUnlock", "L2, L3)"),
    ("two-handles-epochs-after-expiry", "ExpiredSameOwnerKeepsEpoch", "epoch above"),
    ("two-handles-takeover-after-release", "UnpinnedLeaseRow", "renew with a lease"),
    ("two-handles-takeover-after-release", "UnfencedMetaAndBlobs", "put-meta with"),
    ("two-handles-takeover-after-expiry", "UnpinnedLeaseRow", "renew with a lease"),
    ("x1-superseded-terminal-meta", "UnfencedMetaAndBlobs", "(X1)"),
    ("x2-stale-checkpoint", "UnfencedMetaAndBlobs", "(X2)"),
    ("two-handles-seq-guard-race", "SeqGuardBeforeBegin", "(J6)"),
    ("two-handles-seq-guard-race", "SeqGuardThenUnlock", "(J6)"),
    ("x7-shared-instance-threads", "NoInstanceLock", "(X7, Q9)"),
    ("two-handles-batch-seen-whole", "SplitBatch", "saw part of a batch"),
    ("two-handles-across-processes", "ProcessLocalLeases", "not in one process: L1"),
]

SELF_TESTED: frozenset[str] = frozenset(
    {
        "two-handles-across-processes",
        "two-handles-batch-seen-whole",
        "two-handles-epochs-after-expiry",
        "two-handles-epochs-concurrent",
        "two-handles-epochs-interleaved",
        "two-handles-exclusive-acquire",
        "two-handles-seq-guard-race",
        "two-handles-takeover-after-expiry",
        "two-handles-takeover-after-release",
        "x1-superseded-terminal-meta",
        "x2-stale-checkpoint",
        "x7-shared-instance-threads",
    }
)


(
    test_broken_store_fails_the_named_check,
    test_self_tested_names_exactly_the_checks_exercised_here,
) = broken_store_self_tests(SUITE, CASES, SELF_TESTED, BUG)
