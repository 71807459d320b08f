"""Broken SQLite stores that only another process shows (issue 22, classes 5 and 6).

Every handle of one interpreter shares the state, so each in-process check
passes; a second process has its own copy. ``CheckThenCreateBoot`` boots a new
file safely only when it is opened once before anything races. Open them through
``_broken_sqlite.sqlite_locations``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import apsw

from rulvar_store import ConfigError, Lease
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._schema import SCHEMA_DDL, bootstrap
from tests.conformance.selftests._broken_sqlite import EpochReadBeforeBegin

__all__ = ["CheckThenCreateBoot", "ProcessLocalEpochs"]


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


def _check_then_create(connection: apsw.Connection, in_memory: bool) -> None:
    cursor = connection.cursor()
    try:
        found = cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'entries'"
        ).fetchall()[0][0]
        if found:
            bootstrap(connection, in_memory)
            return
        time.sleep(0.05)  # a slow step of a first migration
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            for statement in SCHEMA_DDL:  # the bug: no IF NOT EXISTS, no transaction
                cursor.execute(statement.replace(" IF NOT EXISTS", ""))
        except apsw.Error as exc:  # "the migration failed": never retried
            raise ConfigError(f"first migration failed: {exc}") from exc
    finally:
        cursor.close()


class CheckThenCreateBoot(SqliteStore):
    """Boots a new file by checking for its tables, then creating them plainly.

    Alone, and on any file already booted, it is the real store; two processes
    opening one new file at once both find no tables and the second CREATE fails.
    """

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, _boot_attempt=_check_then_create, **options)
