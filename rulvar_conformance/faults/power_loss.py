"""The power-loss suite (CONTRACT W1-W5): ``rulvar check sqlite:///x.db --suite power-loss``.

One check per ``synchronous`` level cuts the power of a SQLite store hundreds
of times (``sqlite_power``), one cuts it under the file store's journal
(``file_power``), and each row says what the cuts did. A location of another
backend reports a row not run, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from rulvar_conformance.faults._file_power import PowerLossFileOps
from rulvar_conformance.faults._notes import noted_check
from rulvar_conformance.faults._where import scratch_beside
from rulvar_conformance.faults.file_power import LayerFactory, run_file_power_loss
from rulvar_conformance.faults.sqlite_power import (
    SqliteOpener,
    Synchronous,
    open_sqlite_at,
    run_power_loss,
)
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    not_run,
    require,
)
from rulvar_store.backend import LocationFactory

__all__ = [
    "FILE_POWER_CUTS",
    "POWER_CUTS",
    "POWER_LOSS_CLAUSES",
    "PowerLossPlan",
    "power_loss_conformance",
]

POWER_CUTS: Final = 300
"""Cuts per ``synchronous`` level: 40-55 s each on a busy 2-core VM."""

FILE_POWER_CUTS: Final = 100
"""Cuts under the file store: about 20 s on a busy 2-core VM."""

TIME_CAP_S: Final = 150.0
"""Below the CLI's default check timeout (180 s); fewer cuts than asked fail."""

POWER_LOSS_CLAUSES: Final = {
    "FULL": ("W1", "W2", "W4"),
    "NORMAL": ("W1", "W3", "W4"),
}
"""The clauses each SQLite row checks; the file-store row checks W5."""


@dataclass(frozen=True)
class PowerLossPlan:
    """How many cuts, the seed, and what is under test (a self-test swaps in a defect)."""

    cuts: int = POWER_CUTS
    file_cuts: int = FILE_POWER_CUTS
    seed: int | None = None
    sqlite_opener: SqliteOpener = open_sqlite_at
    file_layer: LayerFactory = PowerLossFileOps


class _CutReport(Protocol):
    cuts: int
    violations: list[str]

    def summary(self) -> str: ...


def _cut_check(
    locations: LocationFactory,
    scheme: str,
    cuts: int,
    run: Callable[[Path], _CutReport],
    identity: tuple[str, str, Sequence[str]],
) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, scheme) as workdir:
                report = run(workdir)
        finally:
            location.remove()
        say.append(report.summary())
        require(not report.violations, "; ".join(report.violations))
        require(
            report.cuts >= cuts,
            f"only {report.cuts} of {cuts} power cuts ran within {TIME_CAP_S:.0f} s",
        )

    check_id, title, clauses = identity
    return noted_check(check_id, title, clauses, body)


def _sqlite_check(
    locations: LocationFactory, synchronous: Synchronous, plan: PowerLossPlan
) -> ConformanceCheck:
    kept = (
        "every acknowledged write kept"
        if synchronous == "FULL"
        else "a prefix of each run kept"
    )
    return _cut_check(
        locations,
        "sqlite",
        plan.cuts,
        lambda workdir: run_power_loss(
            workdir,
            synchronous,
            plan.cuts,
            seed=plan.seed,
            opener=plan.sqlite_opener,
            time_cap_s=TIME_CAP_S,
        ),
        (
            f"power-loss-sqlite-{synchronous.lower()}",
            f"{plan.cuts} power cuts at synchronous={synchronous}: integrity, "
            f"{kept}, epochs above durable leases",
            POWER_LOSS_CLAUSES[synchronous],
        ),
    )


def _file_check(locations: LocationFactory, plan: PowerLossPlan) -> ConformanceCheck:
    def run(workdir: Path) -> _CutReport:
        if not os.path.isdir("/proc/self/fd"):
            # The model finds a synced descriptor's file or folder through /proc.
            not_run("the file-store power model needs /proc/self/fd (Linux)")
        return run_file_power_loss(
            workdir,
            plan.file_cuts,
            seed=plan.seed,
            layer=plan.file_layer,
            time_cap_s=TIME_CAP_S,
        )

    return _cut_check(
        locations,
        "file",
        plan.file_cuts,
        run,
        (
            "power-loss-file",
            f"{plan.file_cuts} power cuts under the file store: acknowledged appends "
            "and metas kept, torn last lines repaired, folders synced on create",
            ("W5",),
        ),
    )


def power_loss_conformance(
    locations: LocationFactory, plan: PowerLossPlan | None = None
) -> ConformanceSuite:
    """The power-loss suite: SQLite at FULL and NORMAL, then the file store.

    Building opens nothing. A ``sqlite://`` location runs the SQLite rows and
    a ``file://`` one the file-store row; each reports the others not run.
    """
    plan = plan or PowerLossPlan()
    return ConformanceSuite(
        "power-loss",
        (
            _sqlite_check(locations, "FULL", plan),
            _sqlite_check(locations, "NORMAL", plan),
            _file_check(locations, plan),
        ),
    )
