"""Broken in-memory stores whose ``load_since`` cursor is wrong in one plausible way.

Each is the real ``MemoryStore`` with its ``load_since`` rewritten; open them
through ``_broken_memory_races.memory_locations``.
"""

from __future__ import annotations

import time

from rulvar_store import JournalTail, MemoryStore
from rulvar_store.backend import load_records, parse_cursor

__all__ = ["IncarnationBlindCursor", "LengthReadAfterEntries"]


class IncarnationBlindCursor(MemoryStore):  # type: ignore[misc]  # final; the bug is the point
    """The cursor is a count of entries read; it ignores which incarnation they were.

    After a delete and re-creation an old cursor skips the new journal's first
    entries and returns the rest as new, never saying it started over.
    """

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        position = parse_cursor(cursor, "memory", 2)
        with self._domain.lock:
            journal = self._domain.entries.get(run_id, [])
            start = 0 if position is None else min(position[1], len(journal))
            texts = [text for text, _ in journal[start:]]
            return JournalTail(load_records(texts), f"memory:0:{len(journal)}")


class LengthReadAfterEntries(MemoryStore):  # type: ignore[misc]  # final
    """Reads the new entries, then the journal's length for the cursor, in two steps.

    An entry appended between the two is never returned: the cursor is past it.
    """

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        position = parse_cursor(cursor, "memory", 2)
        start = 0 if position is None else position[1]
        with self._domain.lock:
            texts = [text for text, _ in self._domain.entries.get(run_id, [])[start:]]
        time.sleep(0.0005)  # parsing, logging: anything between the two reads
        with self._domain.lock:
            length = len(self._domain.entries.get(run_id, []))
        return JournalTail(load_records(texts), f"memory:0:{length}")
