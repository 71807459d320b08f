"""The database format (CONTRACT Appendix S) and the idempotent bootstrap unit.

The five tables, their columns and the index names and expressions are shared
with the reference implementation, so a file written by either is read and
fenced correctly by the other. Never alter them; tables or indexes of our own
would be named ``rulvar_py_*`` and created idempotently.
"""

from __future__ import annotations

from typing import Final

import apsw

from rulvar_store.errors import ConfigError
from rulvar_store_sqlite import _sql as sql

__all__ = [
    "EXPECTED_COLUMNS",
    "INDEX_NAMES",
    "OWN_DDL",
    "SCHEMA_DDL",
    "TABLE_NAMES",
    "bootstrap",
    "check_format_readonly",
]

# One statement per item, in creation order. `sqlite_master.sql` keeps each text
# without its `IF NOT EXISTS`; tests compare against that form.
SCHEMA_DDL: Final[tuple[str, ...]] = (
    "CREATE TABLE IF NOT EXISTS entries ("
    "id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "run_id TEXT NOT NULL, "
    "payload TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_by_run ON entries (run_id, id)",
    "CREATE INDEX IF NOT EXISTS entries_run_seq ON entries "
    "(run_id, CAST(json_extract(payload, '$.seq') AS INTEGER))",
    "CREATE TABLE IF NOT EXISTS meta (run_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS meta_by_status ON meta (json_extract(payload, '$.status'))",
    "CREATE INDEX IF NOT EXISTS meta_by_name ON meta (json_extract(payload, '$.name'))",
    "CREATE TABLE IF NOT EXISTS leases ("
    "run_id TEXT PRIMARY KEY, "
    "owner TEXT NOT NULL, "
    "epoch INTEGER NOT NULL, "
    "expires_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS epochs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS blobs ("
    "ref TEXT PRIMARY KEY, "
    "run_id TEXT NOT NULL, "
    "data BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS blobs_by_run ON blobs (run_id)",
)

# Our own objects (Appendix S allows rulvar_py_* beside the five tables): the
# process that took each lease, for crash-fast takeover (L11). A file booted by
# an older version gains it at its next read-write boot; a read-only open and
# the reference do without it.
OWN_DDL: Final[tuple[str, ...]] = (
    "CREATE TABLE IF NOT EXISTS rulvar_py_lease_holders ("
    "run_id TEXT PRIMARY KEY, "
    "epoch INTEGER NOT NULL, "
    "process TEXT NOT NULL)",
)
OWN_NAMES: Final = ("rulvar_py_lease_holders",)

TABLE_NAMES: Final = ("entries", "meta", "leases", "epochs", "blobs")
INDEX_NAMES: Final = (
    "entries_by_run",
    "entries_run_seq",
    "meta_by_status",
    "meta_by_name",
    "blobs_by_run",
)
EXPECTED_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "entries": ("id", "run_id", "payload"),
    "meta": ("run_id", "payload"),
    "leases": ("run_id", "owner", "epoch", "expires_at"),
    "epochs": ("run_id", "epoch"),
    "blobs": ("ref", "run_id", "data"),
}

_FORMAT_NAMES: Final = TABLE_NAMES + INDEX_NAMES


def _rows(cursor: apsw.Cursor, sql: str) -> list[tuple[object, ...]]:
    # fetchall, always: a half-read cursor keeps a hidden read transaction open.
    return [tuple(row) for row in cursor.execute(sql).fetchall()]


def _ensure_wal(cursor: apsw.Cursor, in_memory: bool) -> None:
    # WAL is persistent in the file: read first, convert only a fresh file. The
    # conversion upgrades a read lock without the busy handler, which is why the
    # whole bootstrap is retried on BUSY (Q4).
    mode = str(_rows(cursor, "PRAGMA journal_mode")[0][0]).lower()
    if mode == "wal" or (in_memory and mode == "memory"):
        return
    mode = str(_rows(cursor, "PRAGMA journal_mode=WAL")[0][0]).lower()
    if mode != "wal" and not (in_memory and mode == "memory"):
        raise ConfigError(
            f"sqlite: could not switch the database to WAL (got {mode!r})"
        )


def _schema_present(
    cursor: apsw.Cursor, wanted: tuple[str, ...] = _FORMAT_NAMES
) -> bool:
    names = {
        row[0]
        for row in _rows(
            cursor,
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')",
        )
    }
    return all(name in names for name in wanted)


def _verify_columns(cursor: apsw.Cursor) -> None:
    # Tables not created yet read back as no columns and pass; the DDL adds them.
    for table, expected in EXPECTED_COLUMNS.items():
        found = tuple(
            str(row[1]) for row in _rows(cursor, f"PRAGMA table_info({table})")
        )
        if found and found != expected:
            raise ConfigError(
                f"sqlite: table {table!r} has columns {found}, expected {expected}: "
                "this file was not written by a rulvar store of this format"
            )


def bootstrap(connection: apsw.Connection, in_memory: bool) -> None:
    """Bring the database to the Appendix S format; idempotent, one retryable unit.

    Reads ``journal_mode`` and converts to WAL only if needed, checks the columns
    of the tables that already exist, then creates the five tables and their
    indexes inside ``BEGIN IMMEDIATE`` unless all of them exist (a read-only
    check, so booting over an initialized file takes no write lock).

    Raises:
        apsw.BusyError: another connection held a lock (the caller retries).
        ConfigError: WAL could not be enabled, or the tables have another shape.
    """
    cursor = connection.cursor()
    try:
        _ensure_wal(cursor, in_memory)
        _verify_columns(cursor)  # before the DDL: indexes on a foreign shape would fail
        if not _schema_present(cursor, _FORMAT_NAMES + OWN_NAMES):
            cursor.execute(sql.BEGIN)
            try:
                for statement in SCHEMA_DDL + OWN_DDL:
                    cursor.execute(statement)
                cursor.execute(sql.COMMIT)
            except BaseException:
                if connection.in_transaction:
                    cursor.execute(sql.ROLLBACK)
                raise
    finally:
        cursor.close()


def check_format_readonly(connection: apsw.Connection) -> None:
    """Check, with reads only, that the file holds this format's tables.

    Raises:
        ConfigError: a table or index is missing, or a table has another shape.
        apsw.Error: the file could not be read (the caller translates it).
    """
    cursor = connection.cursor()
    try:
        _verify_columns(cursor)
        if not _schema_present(cursor):
            raise ConfigError(
                "sqlite: the file has no rulvar store tables (opened read-only, "
                "so nothing was created)"
            )
    finally:
        cursor.close()
