"""Named soak sizes: ``quick`` (tests), ``ci`` (every CI run, per backend), ``nightly`` (10x ci).

A profile is data: writer count, ttl, shared runs, the chaos budget and the
quorum the storm must reach before it stops; ``seconds`` is the cap, reaching it
first is a violation (S7). ``companions`` threads per writer process append to
runs of their own through the writer's handle, so stores that batch one
handle's callers (group commit) are soaked batching.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from rulvar_conformance.soak.runner import ChaosPlan
from rulvar_conformance.soak.tally import SoakQuorum

__all__ = ["PROFILES", "SoakProfile", "profile_named"]


@dataclass(frozen=True)
class SoakProfile:
    """One named soak size."""

    name: str
    writers: int
    seconds: float
    ttl_ms: int
    runs: tuple[str, ...]
    chaos: ChaosPlan
    quorum: SoakQuorum
    seed: int = 1
    companions: int = 2

    def scaled(self, factor: int, name: str) -> SoakProfile:
        """This profile with every count and the cap multiplied by ``factor``."""
        q = self.quorum
        return replace(
            self,
            name=name,
            seconds=self.seconds * factor,
            chaos=replace(
                self.chaos,
                pauses=self.chaos.pauses * factor,
                kills=self.chaos.kills * factor,
            ),
            quorum=replace(
                q,
                takeovers=q.takeovers * factor,
                stale_probes=q.stale_probes * factor,
                pauses=q.pauses * factor,
                kills=q.kills * factor,
                holder_deletes=q.holder_deletes * factor,
                victims=q.victims * factor,
            ),
        )


def _runs(count: int) -> tuple[str, ...]:
    return tuple(f"soak-run-{index}" for index in range(count))


QUICK: Final = SoakProfile(
    name="quick",
    writers=4,
    seconds=90.0,
    ttl_ms=250,
    runs=_runs(3),
    chaos=ChaosPlan(pauses=5, kills=5, interval_ms=1800),
    quorum=SoakQuorum(
        takeovers=50, stale_probes=2_000, holder_deletes=3, pauses=5, kills=5
    ),
)
CI: Final = SoakProfile(
    name="ci",
    writers=8,
    seconds=300.0,
    ttl_ms=250,
    runs=_runs(4),
    chaos=ChaosPlan(pauses=30, kills=30, interval_ms=1200),
    quorum=SoakQuorum(
        takeovers=300,
        stale_probes=10_000,
        holder_deletes=20,
        victims=20,
        pauses=30,
        kills=30,
    ),
)
NIGHTLY: Final = CI.scaled(10, "nightly")

PROFILES: Final = {profile.name: profile for profile in (QUICK, CI, NIGHTLY)}


def profile_named(name: str) -> SoakProfile:
    """The profile called ``name``.

    Raises:
        KeyError: no such profile (the message lists the names).
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(
            f"no soak profile {name!r}; choose one of {', '.join(PROFILES)}"
        ) from None
