"""The durability line of ``rulvar check``: what the store's server promises (P20).

Read once, from a fresh location, before the suites run: the durability
setting the session runs and, for a store on a server that may have standbys,
what a failover can do to an acknowledged write (``async`` can lose it).
"""

from __future__ import annotations

from typing import Any

from rulvar_conformance.harness.site import at_fresh_location
from rulvar_store.backend import LocationFactory, reports_durability

__all__ = ["durability_of"]


def durability_of(locations: LocationFactory) -> dict[str, Any] | None:
    """The store's ``durability()`` as a dict, or ``None`` when it reports none."""
    with at_fresh_location(locations) as site:
        journal: Any = site.open().journal
        if not reports_durability(journal):
            return None
        report = journal.durability()
        return {
            "setting": report.setting,
            "observed": report.observed,
            "replication": report.replication or None,
            "detail": report.detail or None,
        }


def durability_line(found: dict[str, Any]) -> str:
    """One line for the text output."""
    line = f"durability: {found['setting']}={found['observed']}"
    if found["replication"]:
        line += f"; replication {found['detail']}"
    return line
