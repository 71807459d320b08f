"""What the soak found, as typed records, and how a report groups them.

Every check of the soak (referee, final state, companions, the runner's own)
writes one line per finding in the form ``KIND: what happened``. ``violation``
keeps that line and its kind apart, plus the store surface it concerns, so a
report can count findings per kind and surface and show a few examples of each
instead of hundreds of near-identical lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["Violation", "ViolationGroup", "grouped", "plural", "violation"]

EXAMPLES: Final = 3
"""Examples printed per group: enough to see the pattern, few enough to read."""

SURFACE_WORDS: Final = {
    "marker": "journal append",
    "append": "journal append",
    "meta": "meta put",
    "blob-put": "blob put",
    "blob-delete": "blob delete",
    "delete": "run delete",
    "renew": "lease renew",
    "release": "lease release",
    "cross-run": "blob put into a run the lease does not hold",
    "cross-run-live": "blob put into a run the lease does not hold",
}
"""The store call each soak surface stands for, in a reader's words."""

MEANINGS: Final = {
    "STALE ACCEPT": "the store accepted a write made with a lease that a later "
    "epoch had superseded (fencing, F1)",
    "CROSS-RUN ACCEPT": "the store accepted a write into a run the lease was not "
    "granted for (the run check, F2)",
    "FENCE BYPASSED": "a holder's own write was refused by the seq guard because "
    "another writer's entry was already in its run: the lease was not checked "
    "inside the write transaction",
    "SEQ GUARD BEFORE FENCE": "a write under a superseded lease was refused as out "
    "of order instead of as stale: the fence must refuse it first",
    "LOST WRITE": "an acknowledged write is missing from the final state",
    "DOUBLE GRANT": "one epoch of a run was granted to two holders",
}
"""One sentence per well-known kind, printed once above its examples."""


@dataclass(frozen=True)
class Violation:
    """One finding: its kind (``STALE ACCEPT``), the full line, the surface if any."""

    kind: str
    line: str
    surface: str = ""

    def __str__(self) -> str:
        return self.line


def violation(line: str, surface: str = "") -> Violation:
    """A finding from its ``KIND: detail`` line; ``surface`` names the store call."""
    kind = line.split(": ", 1)[0] if ": " in line else line
    return Violation(kind, line, SURFACE_WORDS.get(surface, surface))


@dataclass(frozen=True)
class ViolationGroup:
    """Findings of one kind on one surface: how many, and the first few."""

    kind: str
    surface: str
    count: int
    examples: tuple[str, ...]

    @property
    def title(self) -> str:
        where = f" on {self.surface}" if self.surface else ""
        return f"{self.kind}{where}: {plural(self.count, 'finding')}"

    @property
    def meaning(self) -> str:
        return MEANINGS.get(self.kind, "")


def grouped(violations: Iterable[Violation]) -> list[ViolationGroup]:
    """Groups by (kind, surface) in order of first appearance."""
    members: dict[tuple[str, str], list[str]] = {}
    for item in violations:
        members.setdefault((item.kind, item.surface), []).append(item.line)
    return [
        ViolationGroup(kind, surface, len(lines), tuple(lines[:EXAMPLES]))
        for (kind, surface), lines in members.items()
    ]


def plural(count: int, noun: str) -> str:
    """``1 violation``, ``2 violations``: the count with its noun agreeing."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
