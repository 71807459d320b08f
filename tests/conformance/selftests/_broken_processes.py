"""Broken SQLite stores that keep shared state in one process (issue 22, class 5).

Every handle of one interpreter shares the state, so each in-process check
passes; a second process has its own copy. Open them through
``_broken_sqlite.sqlite_locations``.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from rulvar_store import Lease
from tests.conformance.selftests._broken_sqlite import EpochReadBeforeBegin

__all__ = ["ProcessLocalEpochs"]


class ProcessLocalEpochs(EpochReadBeforeBegin):
    """Numbers epochs from a counter kept in this process, per database file.

    One acquire at a time per process (a process-wide lock), and the lease row
    itself is in the database, so exclusivity holds; but another process
    counts from its own zero and hands out epochs already issued, so a
    superseded holder of that epoch can write again.
    """

    _epochs: ClassVar[dict[tuple[str, str], int]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def _next_epoch(self, run_id: str) -> int:
        return self._epochs.get((self.path, run_id), 0) + 1

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self._guard:
            lease = super().acquire(run_id, owner)
            self._epochs[(self.path, run_id)] = lease.epoch
            return lease
