"""A store's counters without any dependency: what ``store.stats()`` returns.

Like ``psycopg_pool``'s ``get_stats()``: a plain dict an operator can log, poll
or put in a report. Counting takes a lock and an add, so it stays on always.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "COUNTER_NAMES",
    "REFUSED_BY_SURFACE",
    "StoreStats",
    "merge_stats",
    "stats_since",
]

COUNTER_NAMES: Final = (
    "calls",
    "errors",
    "stale_writes_refused",
    "leases_acquired",
    "leases_taken_over",
    "leases_lost",
    "leases_released",
    "busy_retries",
    "busy_timeouts",
    "unavailable_errors",
    "unknown_outcomes",
    "group_commit_batches",
    "group_commit_operations",
)
"""The counters every built-in store reports (at 0 until something happens)."""

REFUSED_BY_SURFACE: Final = "stale_writes_refused_by_surface"
"""The key of the refusals split by surface: journal, meta, run-delete, lease,
blob, blob-delete."""


TICKED: Final = ("calls", "leases_acquired", "leases_released")
"""Counters every successful call may move: counted without a lock."""


def _value(ticks: itertools.count[int]) -> int:
    """How often ``next`` ran on ``ticks`` (its repr is ``count(N)``)."""
    return int(repr(ticks)[6:-1])


class StoreStats:
    """One object's counters; thread-safe. Names beyond ``COUNTER_NAMES`` (a
    saver's checkpoints and writes) are added on first use.

    The counters of a successful call are ``itertools.count`` objects: ``next``
    on one is a single C call that the GIL never splits, so the common path
    takes no lock; the rest (errors, refusals, a saver's tallies) take one.
    """

    def __init__(self, names: Iterable[str] = COUNTER_NAMES) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(names, 0)
        self._refused: dict[str, int] = {}
        self.ticks: dict[str, itertools.count[int]] = {
            name: itertools.count() for name in TICKED
        }

    def add(self, name: str, amount: int = 1) -> None:
        ticks = self.ticks.get(name)
        if ticks is not None:
            for _ in range(amount):
                next(ticks)
            return
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + amount

    def tick(self, names: tuple[str, ...]) -> None:
        """One each of ``TICKED`` counters (a successful call's), without a lock."""
        ticks = self.ticks
        for name in names:
            next(ticks[name])

    def refused(self, surface: str) -> None:
        with self._lock:
            self._counts["stale_writes_refused"] = (
                self._counts.get("stale_writes_refused", 0) + 1
            )
            self._refused[surface] = self._refused.get(surface, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counts: dict[str, Any] = dict(self._counts)
            counts[REFUSED_BY_SURFACE] = dict(self._refused)
        for name, ticks in self.ticks.items():
            counts[name] = counts.get(name, 0) + _value(ticks)
        return counts


def merge_stats(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Add several ``snapshot()`` dicts (a journal and its blob twin) into one."""
    total: dict[str, Any] = dict.fromkeys(COUNTER_NAMES, 0)
    total[REFUSED_BY_SURFACE] = {}
    for part in parts:
        for name, value in part.items():
            if name == REFUSED_BY_SURFACE:
                by_surface = total[name]
                for surface, count in value.items():
                    by_surface[surface] = by_surface.get(surface, 0) + count
            else:
                total[name] = total.get(name, 0) + value
    return total


def stats_since(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What the counters moved between two snapshots (``process_stats()`` twice)."""
    moved: dict[str, Any] = {}
    for name, value in after.items():
        earlier = before.get(name)
        if isinstance(value, dict):
            earlier = earlier if isinstance(earlier, dict) else {}
            moved[name] = {
                key: count - earlier.get(key, 0)
                for key, count in value.items()
                if count != earlier.get(key, 0)
            }
        elif isinstance(value, int):
            moved[name] = value - (earlier if isinstance(earlier, int) else 0)
    return moved
