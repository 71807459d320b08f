"""The disk-faults suite's registry entry; the suite lives in ``rulvar_conformance.faults``.

Not default: it injects full-disk and I/O errors under the store (CONTRACT 17).
"""

from __future__ import annotations

from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import ConformanceSuite

__all__ = ["SPEC"]


def _build(certification: Certification) -> ConformanceSuite:
    # Imported here: the SQLite fault layer imports apsw.
    from rulvar_conformance.faults.disk_faults import disk_faults_conformance

    return disk_faults_conformance(certification.locations)


SPEC: Final = SuiteSpec(
    "disk-faults",
    _build,
    None,
    False,
    "full disk, I/O errors and read-only files: typed errors, nothing lost (17)",
)
