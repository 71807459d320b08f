"""Broken SQLite stores that only another process shows (issue 22, classes 5 and 6).

Every handle of one interpreter shares the state, so each in-process check
passes; a second process has its own copy. ``CheckThenCreateBoot`` boots a new
file safely only when it is opened once before anything races. Open them through
``_broken_sqlite.sqlite_locations``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, TypeVar

import apsw

from rulvar_store import ConfigError, Lease
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._group_commit import GroupCommitter
from rulvar_store_sqlite._schema import SCHEMA_DDL, bootstrap
from rulvar_store_sqlite._transaction import Operation
from tests.conformance.selftests._broken_sqlite import EpochReadBeforeBegin

__all__ = [
    "CheckThenCreateBoot",
    "ProcessLocalEpochs",
    "ProcessLocalWriteLock",
    "SkewedProcessClock",
]

T = TypeVar("T")


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


class _ProcessLockDoor(GroupCommitter):
    """Deferred BEGIN, made safe in one interpreter by a lock per database file."""

    begin = "BEGIN"  # the bug's other half: no write lock until the first write
    _locks: ClassVar[dict[str, threading.Lock]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()
    path: str = ""

    def submit(self, op: Operation[T]) -> T:
        with self._guard:
            lock = self._locks.setdefault(self.path, threading.Lock())
        with lock:
            return super().submit(op)


class ProcessLocalWriteLock(SqliteStore):
    """Serializes writers with a threading lock standing in for BEGIN IMMEDIATE.

    Every handle of one interpreter takes the same lock, so no deferred
    transaction ever has to upgrade under another's; a second process does not
    see the lock, and its writers upgrade concurrently: a release from another
    process lands while a writer stands between its fence check and its commit
    (x3-window-across-processes fails it). In one process the lock also hides
    the deferred BEGIN from x3-window-append, which fails ``DeferredBegin`` alone.
    """

    _door_type = _ProcessLockDoor

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        self._door.path = path


class SkewedProcessClock(SqliteStore):
    """Reads lease expiry from the declared clock plus an offset kept per process.

    Handles of one interpreter agree on the time, so every lease check in one
    process passes; a process whose offset differs (a host whose clock is ahead,
    here an hour) finds another process's live lease expired and takes it.
    ``skew_ms`` is a class attribute: a spawned child imports it afresh as 0.
    """

    skew_ms: ClassVar[int] = 0

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(path, **options)
        declared = self._now
        self._now = lambda: declared() + type(self).skew_ms
