"""The kill-points suite's registry entry; the suite lives in ``rulvar_conformance.kill_points``.

Not default: every row starts a child process and kills it (CONTRACT 9).
"""

from __future__ import annotations

from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import ConformanceSuite

__all__ = ["SPEC"]


def _build(certification: Certification) -> ConformanceSuite:
    # Imported here: the kill points pull in the worker and driver modules.
    from rulvar_conformance.kill_points.suite import kill_point_conformance

    return kill_point_conformance(certification)


SPEC: Final = SuiteSpec(
    "kill-points",
    _build,
    None,
    False,
    "SIGKILL around run writes and inside store transactions (9)",
)
