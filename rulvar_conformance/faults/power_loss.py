"""The power-loss suite (CONTRACT W1-W4): ``rulvar check sqlite:///x.db --suite power-loss``.

One check per ``synchronous`` level cuts the power of a SQLite store hundreds
of times (``sqlite_power``) and says, in its row, what the cuts did. A location
of another backend reports the SQLite checks not run, with the reason.
"""

from __future__ import annotations

from typing import Final

from rulvar_conformance._kit import ConformanceCheck, ConformanceSuite, require
from rulvar_conformance.faults._notes import noted_check
from rulvar_conformance.faults._where import scratch_beside
from rulvar_conformance.faults.sqlite_power import Synchronous, run_power_loss
from rulvar_store.backend import LocationFactory

__all__ = ["POWER_CUTS", "POWER_LOSS_CLAUSES", "power_loss_conformance"]

POWER_CUTS: Final = 300
"""Cuts per ``synchronous`` level: about 15-20 s each on a 2-core VM."""

TIME_CAP_S: Final = 150.0
"""Below the CLI's default check timeout (180 s); fewer cuts than asked fail."""

POWER_LOSS_CLAUSES: Final = {
    "FULL": ("W1", "W2", "W4"),
    "NORMAL": ("W1", "W3", "W4"),
}


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


def power_loss_conformance(
    locations: LocationFactory, *, cuts: int = POWER_CUTS, seed: int | None = None
) -> ConformanceSuite:
    """The power-loss suite: FULL then NORMAL (building opens nothing)."""
    return ConformanceSuite(
        "power-loss",
        (
            _sqlite_check(locations, "FULL", cuts, seed),
            _sqlite_check(locations, "NORMAL", cuts, seed),
        ),
    )
