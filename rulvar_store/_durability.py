"""What a store promises about an acknowledged write, and what its session really runs.

A store whose durability rests on a database setting (SQLite's ``synchronous``,
PostgreSQL's ``synchronous_commit``) declares the value it means to run with and
reads the value back from its live session on request. The conformance kit
compares the two (a store that asks for FULL and runs NORMAL, or a pool whose
sessions drop to ``synchronous_commit=off``, acknowledges writes a crash can
take back), and separately kills a process right after its acknowledgements
to see that every acknowledged write survived.

A store with no such setting (the file store fsyncs every write; the memory
store has no durability) does not implement ``durability()``; the check then
does not run for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["DurabilityReport", "ReportsDurability", "reports_durability"]


@dataclass(frozen=True, slots=True)
class DurabilityReport:
    """The durability setting a store declares and the one its session runs.

    Attributes:
        setting: the database's name for it (``"synchronous"``).
        declared: the value the store promises, spelled as the database spells
            a read-back (``"FULL"``, ``"on"``).
        observed: the value read back from the live session, in the same spelling.
        replication: what a failover can do to an acknowledged write, for a
            store on a server that may have standbys: ``"async"`` (it can lose
            it), ``"sync"`` or ``"quorum"`` (a synchronous standby has it);
            ``""`` when the store has no such notion (an embedded database).
        detail: the replication settings and state read from the server, in words.
    """

    setting: str
    declared: str
    observed: str
    replication: str = ""
    detail: str = ""


@runtime_checkable
class ReportsDurability(Protocol):
    """A store that can report its durability setting (``DurabilityReport``)."""

    def durability(self) -> DurabilityReport:
        """Read the setting back from the live session (never a cached option)."""
        ...


def reports_durability(store: object) -> bool:
    """Whether ``store`` offers ``durability()`` (the kit's check runs only then)."""
    return isinstance(store, ReportsDurability)
