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
from rulvar_conformance.soak.storm import ChaosPlan
from rulvar_conformance.soak.tally import SoakQuorum

__all__ = ["FAULT_KINDS", "FaultProfile", "fault_profile"]

FAULT_KINDS: Final = ("network", "server")


@dataclass(frozen=True)
class FaultProfile:
    """One fault soak size: the storm's, plus the fault plan."""

    name: str
    kind: str
    writers: int
    seconds: float
    ttl_ms: int
    runs: tuple[str, ...]
    chaos: ChaosPlan
    quorum: SoakQuorum
    plan: FaultPlan
    outage_s: float
    companions: int = 2
    seed: int = 1


_RUNS: Final = tuple(f"soak-run-{index}" for index in range(3))
_QUICK_QUORUM: Final = SoakQuorum(takeovers=5)
_CI_QUORUM: Final = SoakQuorum(takeovers=40, stale_probes=500)

_PROFILES: Final = {
    ("network", "quick"): FaultProfile(
        "quick", "network", 3, 120.0, 250, _RUNS, ChaosPlan(),
        _QUICK_QUORUM, FaultPlan(partitions=3, resets=3, degrades=1, interval_ms=300),
        outage_s=30.0, companions=1,
    ),
    ("network", "ci"): FaultProfile(
        "ci", "network", 6, 300.0, 250, _RUNS,
        ChaosPlan(pauses=4, kills=4, interval_ms=2000),
        _CI_QUORUM, FaultPlan(partitions=24, resets=24, degrades=6, interval_ms=400),
        outage_s=30.0,
    ),
    ("server", "quick"): FaultProfile(
        "quick", "server", 3, 120.0, 250, _RUNS, ChaosPlan(),
        _QUICK_QUORUM, FaultPlan(server_kills=2, interval_ms=2500), outage_s=60.0,
    ),
    ("server", "ci"): FaultProfile(
        "ci", "server", 4, 300.0, 250, _RUNS,
        ChaosPlan(pauses=4, interval_ms=2000),
        _CI_QUORUM, FaultPlan(server_kills=4, interval_ms=3000), outage_s=60.0,
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
