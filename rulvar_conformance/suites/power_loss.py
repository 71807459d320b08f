"""The power-loss suite's registry entry; the suite lives in ``rulvar_conformance.faults``.

Not default: hundreds of simulated power cuts per row (CONTRACT 16).
"""

from __future__ import annotations

from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import ConformanceSuite

__all__ = ["SPEC"]


def _build(certification: Certification) -> ConformanceSuite:
    # Imported here: the fault layers import apsw, which only SQLite needs.
    from rulvar_conformance.faults.power_loss import power_loss_conformance

    return power_loss_conformance(certification.locations)


SPEC: Final = SuiteSpec(
    "power-loss",
    _build,
    None,
    False,
    "simulated power cuts: SQLite at FULL and NORMAL, the file store's journal (16)",
)
