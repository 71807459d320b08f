"""Broken SQLite stores that keep shared state in one process (issue 22, class 5).

Every handle of one interpreter shares the state, so each in-process check
passes; a second process has its own copy. Open them through
``_broken_sqlite.sqlite_locations``.
"""

from __future__ import annotations

import threading
from typing import ClassVar

import apsw

from rulvar_store import Lease, LeaseHeldError
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite import _sql as sql

__all__ = ["ProcessLocalEpochs"]


class ProcessLocalEpochs(SqliteStore):
    """Numbers epochs from a counter kept in this process, per database file.

    The lease row itself is in the database, so exclusivity holds everywhere;
    but another process counts from its own zero and hands out epochs already
    issued, so a superseded holder of that epoch can write again.
    """

    _epochs: ClassVar[dict[tuple[str, str], int]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def acquire(self, run_id: str, owner: str) -> Lease:
        key = (self.path, run_id)
        with self._guard:
            epoch = self._epochs.get(key, 0) + 1
            now = self._now()

            def check_free() -> None:
                row = self._cursor.execute(sql.LEASE_ROW, (run_id,)).fetchall()
                if row and row[0][2] > now:  # type: ignore[operator]  # INTEGER column
                    raise LeaseHeldError("held", run_id, None, None)

            def take(cursor: apsw.Cursor) -> Lease:
                cursor.execute(
                    "INSERT INTO leases (run_id, owner, epoch, expires_at) "
                    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id) DO UPDATE SET "
                    "owner = excluded.owner, epoch = excluded.epoch, "
                    "expires_at = excluded.expires_at",
                    (run_id, owner, epoch, now + self.lease_ttl_ms),
                )
                return Lease(run_id, owner, epoch)

            lease = self._door.write("acquire", check_free, take)
            self._epochs[key] = epoch
            return lease
