"""The power-loss suite (CONTRACT W1-W5): ``rulvar check sqlite:///x.db --suite power-loss``.

One check per ``synchronous`` level cuts the power of a SQLite store hundreds
of times (``sqlite_power``), one cuts it under the file store's journal
(``file_power``), and each row says what the cuts did. A location of another
backend reports a row not run, with the reason.
"""

from __future__ import annotations

from typing import Final

from rulvar_conformance._kit import ConformanceCheck, ConformanceSuite, require
from rulvar_conformance.faults._notes import noted_check
from rulvar_conformance.faults._where import scratch_beside
from rulvar_conformance.faults.file_power import run_file_power_loss
from rulvar_conformance.faults.sqlite_power import Synchronous, run_power_loss
from rulvar_store.backend import LocationFactory

__all__ = ["POWER_CUTS", "POWER_LOSS_CLAUSES", "power_loss_conformance"]

POWER_CUTS: Final = 300
"""Cuts per ``synchronous`` level: about 15-20 s each on a 2-core VM."""

FILE_POWER_CUTS: Final = 100
"""Cuts under the file store: about 20-35 s on a 2-core VM."""

TIME_CAP_S: Final = 150.0
"""Below the CLI's default check timeout (180 s); fewer cuts than asked fail."""

POWER_LOSS_CLAUSES: Final = {
    "FULL": ("W1", "W2", "W4"),
    "NORMAL": ("W1", "W3", "W4"),
}
"""The clauses each SQLite row checks; the file-store row checks W5."""


def _sqlite_check(
    locations: LocationFactory, synchronous: Synchronous, cuts: int, seed: int | None
) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, "sqlite") as workdir:
                report = run_power_loss(
                    workdir, synchronous, cuts, seed=seed, time_cap_s=TIME_CAP_S
                )
        finally:
            location.remove()
        say.append(report.summary())
        require(not report.violations, "; ".join(report.violations))
        require(
            report.cuts >= cuts,
            f"only {report.cuts} of {cuts} power cuts ran within {TIME_CAP_S:.0f} s",
        )

    title = (
        f"{cuts} power cuts at synchronous={synchronous}: integrity, "
        + (
            "every acknowledged write kept"
            if synchronous == "FULL"
            else "a prefix kept"
        )
        + ", epochs above durable leases"
    )
    return noted_check(
        f"power-loss-sqlite-{synchronous.lower()}",
        title,
        POWER_LOSS_CLAUSES[synchronous],
        body,
    )


def _file_check(
    locations: LocationFactory, cuts: int, seed: int | None
) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, "file") as workdir:
                report = run_file_power_loss(
                    workdir, cuts, seed=seed, time_cap_s=TIME_CAP_S
                )
        finally:
            location.remove()
        say.append(report.summary())
        require(not report.violations, "; ".join(report.violations))
        require(
            report.cuts >= cuts,
            f"only {report.cuts} of {cuts} power cuts ran within {TIME_CAP_S:.0f} s",
        )

    return noted_check(
        "power-loss-file",
        f"{cuts} power cuts under the file store: acknowledged appends and metas "
        "kept, torn last lines repaired, folders synced on create",
        ("W5",),
        body,
    )


def power_loss_conformance(
    locations: LocationFactory,
    *,
    cuts: int = POWER_CUTS,
    file_cuts: int = FILE_POWER_CUTS,
    seed: int | None = None,
) -> ConformanceSuite:
    """The power-loss suite: SQLite at FULL and NORMAL, then the file store.

    Building opens nothing. A ``sqlite://`` location runs the SQLite rows and
    a ``file://`` one the file-store row; each reports the others not run.
    """
    return ConformanceSuite(
        "power-loss",
        (
            _sqlite_check(locations, "FULL", cuts, seed),
            _sqlite_check(locations, "NORMAL", cuts, seed),
            _file_check(locations, file_cuts, seed),
        ),
    )
