"""C4 self-tests of X13: file stores missing one piece of their single-writer machinery.

Each broken store passes while nothing dies (every in-process check); the
file-machinery suite's children die by SIGKILL mid-write and show the gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_store import JsonlFileStore
from tests.conformance.selftests._broken_files import (
    DeleteWithoutIntent,
    InPlaceBlobs,
    InPlaceMeta,
    NoTornTailRepair,
    TrustsCachedTail,
    file_locations,
)
from tests.conformance.selftests._support import race_failure_of

SUITE: Final = "file-machinery"
CASES: Final[list[tuple[str, dict[str, Any], str]]] = [
    (
        "files-torn-tail-repaired",
        {"journal": NoTornTailRepair},
        "the torn bytes were not cut",
    ),
    ("files-replace-by-rename", {"journal": InPlaceMeta}, "of the meta"),
    ("files-replace-by-rename", {"blobs": InPlaceBlobs}, "of the blob"),
    ("files-delete-intent", {"journal": DeleteWithoutIntent}, "half visible"),
    (
        "files-tail-sees-other-handle",
        {"journal": TrustsCachedTail},
        "trusted its cached tail without the file's stamp",
    ),
]
SELF_TESTED: frozenset[str] = frozenset(check for check, _, _ in CASES)
FILE_CAPABILITIES: Final = frozenset({"meta_lookup", "single_writer_files"})
"""What the file backend declares: no leases, so only the file checks apply."""


def _names(classes: dict[str, Any]) -> str:
    return "-".join(cls.__name__ for cls in classes.values())


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("check_id", "classes", "says"),
    CASES,
    ids=[f"{check}-{_names(classes)}" for check, classes, _ in CASES],
)
def test_broken_file_store_fails_the_named_check(
    check_id: str, classes: dict[str, Any], says: str, tmp_path: Path
) -> None:
    # The replacing child dies at a random moment while this process reads: a
    # real race, so the broken store must lose within a few runs, not always the first.
    detail = race_failure_of(
        lambda run: file_locations(tmp_path / f"run-{run}", **classes),
        SUITE,
        check_id,
        FILE_CAPABILITIES,
    )
    assert says in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_file_store_passes(tmp_path: Path) -> None:
    (suite,) = certification_suites(
        Certification(
            file_locations(tmp_path, journal=JsonlFileStore), FILE_CAPABILITIES
        ),
        [SUITE],
    )
    suite.run()
