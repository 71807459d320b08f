"""Audit of a run's meta against its journal (CONTRACT 11): the settle record.

``last_run_settle`` finds what the journal says a run settled as; the kill-point
driver uses it to write a settle only on change (A8), the audit to derive the
status a run's meta should show (A2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rulvar_store._records import JournalEntry

__all__ = [
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "SettleRef",
    "last_run_settle",
]

RUN_STATUSES: Final = frozenset(
    {"running", "suspended", "ok", "error", "cancelled", "exhausted"}
)
TERMINAL_RUN_STATUSES: Final = frozenset({"ok", "error", "cancelled", "exhausted"})


@dataclass(frozen=True, slots=True)
class SettleRef:
    """The run status a ``run_settle`` decision recorded, and that entry's seq."""

    run_status: str
    seq: int


def _settled_status(entry: JournalEntry) -> str | None:
    if entry.get("kind") != "decision":
        return None
    value = entry.get("value")
    if not isinstance(value, dict) or value.get("decisionType") != "run_settle":
        return None
    status = value.get("runStatus")
    return status if isinstance(status, str) and status in RUN_STATUSES else None


def last_run_settle(entries: Sequence[JournalEntry]) -> SettleRef | None:
    """Return the LAST ``run_settle`` decision with a valid run status (A1), or None."""
    for entry in reversed(entries):
        status = _settled_status(entry)
        seq = entry.get("seq")
        if status is not None and isinstance(seq, int) and not isinstance(seq, bool):
            return SettleRef(status, seq)
    return None
