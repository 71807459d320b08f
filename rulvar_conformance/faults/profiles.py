"""Fault soak sizes: ``quick`` (tests) and ``ci`` (every CI run), per fault kind.

A fault soak runs beside the process chaos of the plain soak, on a private
cluster, so its quorum asks for less storm and more faults: the CI sizes meet
issue 20's targets (>= 20 partitions of a holder past its ttl and >= 20
connection resets; >= 3 server kills).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rulvar_conformance.faults.chaos import FaultPlan
from rulvar_conformance.soak.profiles import SoakProfile
from rulvar_conformance.soak.storm import ChaosPlan
from rulvar_conformance.soak.tally import SoakQuorum

__all__ = ["FAULT_KINDS", "FaultProfile", "fault_profile"]

FAULT_KINDS: Final = ("network", "server")


@dataclass(frozen=True)
class FaultProfile:
    """One fault soak size: the storm's (a ``SoakProfile``), the fault plan, and
    how long a writer's reads wait out an unavailable server."""

    kind: str
    storm: SoakProfile
    plan: FaultPlan
    outage_s: float

    @property
    def name(self) -> str:
        return self.storm.name


_RUNS: Final = tuple(f"soak-run-{index}" for index in range(3))
_QUICK_QUORUM: Final = SoakQuorum(takeovers=5)
_CI_QUORUM: Final = SoakQuorum(takeovers=40, stale_probes=500)


def _storm(name: str, writers: int, chaos: ChaosPlan, companions: int) -> SoakProfile:
    quorum = _QUICK_QUORUM if name == "quick" else _CI_QUORUM
    seconds = 120.0 if name == "quick" else 300.0
    return SoakProfile(
        name, writers, seconds, 250, _RUNS, chaos, quorum, companions=companions
    )


_PROFILES: Final = {
    ("network", "quick"): FaultProfile(
        "network", _storm("quick", 3, ChaosPlan(), 1),
        FaultPlan(partitions=3, resets=3, degrades=1, interval_ms=300), outage_s=30.0,
    ),
    ("network", "ci"): FaultProfile(
        "network", _storm("ci", 6, ChaosPlan(pauses=4, kills=4, interval_ms=2000), 2),
        FaultPlan(partitions=24, resets=24, degrades=6, interval_ms=400), outage_s=30.0,
    ),
    ("server", "quick"): FaultProfile(
        "server", _storm("quick", 3, ChaosPlan(), 2),
        FaultPlan(server_kills=2, interval_ms=2500), outage_s=60.0,
    ),
    ("server", "ci"): FaultProfile(
        "server", _storm("ci", 4, ChaosPlan(pauses=4, interval_ms=2000), 2),
        FaultPlan(server_kills=4, interval_ms=3000), outage_s=60.0,
    ),
}  # fmt: skip


def fault_profile(kind: str, name: str) -> FaultProfile:
    """The ``name`` size of ``kind`` faults; nightly is the ci size here.

    Raises:
        KeyError: no such kind or size.
    """
    key = (kind, "ci" if name == "nightly" else name)
    if key not in _PROFILES:
        raise KeyError(
            f"no fault soak {kind!r}/{name!r}; kinds: {', '.join(FAULT_KINDS)}, "
            "sizes: quick, ci"
        )
    return _PROFILES[key]
