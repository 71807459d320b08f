"""C4 self-tests of the thread-races suite: real threads catch outside-fence stores."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance.harness.surfaces import SURFACES
from rulvar_store.backend import LocationFactory
from tests.conformance.selftests._support import broken_locations, race_failure_of

SUITE: Final = "thread-races"

# The in-memory store that checks, unlocks, then mutates has no failpoints: only
# these races can catch it, on every surface. The SQLite store that checks before
# BEGIN is caught on the data surfaces (its pinned renew/release are harmless).
CASES: Final = [(f"race-{s.name}", "FenceThenUnlock") for s in SURFACES] + [
    (f"race-{s.name}", "FenceBeforeBegin") for s in SURFACES if not s.lease_row
]

SELF_TESTED: frozenset[str] = frozenset(
    {
        "race-append",
        "race-blob-delete",
        "race-blob-put",
        "race-delete",
        "race-put-meta",
        "race-release",
        "race-renew",
    }
)


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "broken"), CASES, ids=[f"{c}-{b}" for c, b in CASES]
)
def test_broken_store_fails_the_named_thread_race(
    check_id: str, broken: str, tmp_path: Path
) -> None:
    """A store whose fence and write are apart loses a real race against a takeover."""

    def locations_for_run(run: int) -> LocationFactory:
        directory = tmp_path / f"run-{run}"
        directory.mkdir()
        return broken_locations(broken, directory)

    detail = race_failure_of(locations_for_run, SUITE, check_id)
    assert "superseded" in detail or "successor" in detail or "began after" in detail


def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
    """SELF_TESTED (a literal, for the meta-test) lists the checks CASES runs."""
    assert frozenset(check for check, _ in CASES) == SELF_TESTED
