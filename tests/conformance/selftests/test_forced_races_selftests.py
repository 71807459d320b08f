"""C4 self-tests of the forced-races suite: failpoint windows catch outside-fence stores."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance.harness.surfaces import SURFACES
from tests.conformance.selftests._support import (
    broken_locations,
    broken_store_self_tests,
    not_run_reason,
)

BUG: Final = (
    "A real SQLite store with one plausible atomicity bug fails its window check."
)
"""What the broken stores get wrong (the docstring of their test)."""
SUITE: Final = "forced-races"
DATA_SURFACES: Final = [s.name for s in SURFACES if not s.lease_row]

# A fence checked before BEGIN fails every window (the queued write lands); a fence
# in its own transaction fails the data surfaces (the write lands after a takeover
# at the fence transaction's commit). Its pinned renew/release stay harmless.
CASES: Final = (
    [(f"x3-window-{s.name}", "FenceBeforeBegin", "") for s in SURFACES]
    + [(f"x3-window-{name}", "FenceOwnTransaction", "took the run over")
       for name in DATA_SURFACES]
    + [
        ("x3-window-append", "DeferredBegin", "not one transaction"),
        ("x3-queued-seq-race", "SeqGuardBeforeBegin", "transaction (J6)"),
        ("x3-queued-epoch-race", "EpochReadBeforeBegin", "(L2, L3)"),
        ("x3-queued-acquire-race", "AcquireCheckBeforeBegin", "L1, L2)"),
        ("x3-stale-renew", "UnpinnedLeaseRow", "the stale renew (X3)"),
    ]
)  # fmt: skip

SELF_TESTED: frozenset[str] = frozenset(
    {
        "x3-queued-acquire-race",
        "x3-queued-epoch-race",
        "x3-queued-seq-race",
        "x3-stale-renew",
        "x3-window-append",
        "x3-window-blob-delete",
        "x3-window-blob-put",
        "x3-window-delete",
        "x3-window-put-meta",
        "x3-window-release",
        "x3-window-renew",
    }
)


(
    test_broken_store_fails_the_named_check,
    test_self_tested_names_exactly_the_checks_exercised_here,
) = broken_store_self_tests(SUITE, CASES, SELF_TESTED, BUG)


@pytest.mark.clause("C4")
def test_windows_are_not_run_for_a_store_without_failpoints(tmp_path: Path) -> None:
    """A store that never calls failpoints gets the windows as not run, with why."""
    reason = not_run_reason(
        broken_locations("FenceThenUnlock", tmp_path), SUITE, "x3-window-append"
    )
    assert "never calls rulvar_store.backend.hit" in reason
    assert "thread-races" in reason
