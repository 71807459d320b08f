"""The database format is exactly CONTRACT Appendix S; WAL and synchronous read back."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from rulvar_store import ConfigError
from rulvar_store_sqlite import SqliteStore

# Written out here, not imported, so a drift in _schema.py fails this test.
EXPECTED_SQL = {
    ("table", "entries"): "CREATE TABLE entries (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "run_id TEXT NOT NULL, payload TEXT NOT NULL)",
    ("index", "entries_by_run"): "CREATE INDEX entries_by_run ON entries (run_id, id)",
    ("index", "entries_run_seq"): "CREATE INDEX entries_run_seq ON entries "
    "(run_id, CAST(json_extract(payload, '$.seq') AS INTEGER))",
    (
        "table",
        "meta",
    ): "CREATE TABLE meta (run_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    ("index", "meta_by_status"): "CREATE INDEX meta_by_status ON meta "
    "(json_extract(payload, '$.status'))",
    ("index", "meta_by_name"): "CREATE INDEX meta_by_name ON meta "
    "(json_extract(payload, '$.name'))",
    (
        "table",
        "leases",
    ): "CREATE TABLE leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "epoch INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
    (
        "table",
        "epochs",
    ): "CREATE TABLE epochs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    (
        "table",
        "blobs",
    ): "CREATE TABLE blobs (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
    "data BLOB NOT NULL)",
    ("index", "blobs_by_run"): "CREATE INDEX blobs_by_run ON blobs (run_id)",
}
# Our own objects beside the format, named rulvar_py_* as Appendix S allows:
# who took each lease, for crash-fast takeover (L11); the reference ignores it.
OWN_SQL = {
    ("table", "rulvar_py_lease_holders"): "CREATE TABLE rulvar_py_lease_holders "
    "(run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, process TEXT NOT NULL)",
}


def _master(path: str) -> dict[tuple[str, str], str]:
    conn = apsw.Connection(path)
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    finally:
        conn.close()
    return {(str(t), str(n)): str(s) for t, n, s in rows}


@pytest.mark.clause("Q2")
def test_created_schema_is_exactly_appendix_s(db_path: str) -> None:
    """Five tables, five indexes, names and expressions as the reference has them;
    nothing else but our own rulvar_py_* table."""
    SqliteStore(db_path).close()
    assert _master(db_path) == EXPECTED_SQL | OWN_SQL


@pytest.mark.clause("Q2")
def test_reopening_is_idempotent_and_keeps_data(db_path: str) -> None:
    """A second boot over an initialized file changes neither schema nor rows."""
    with SqliteStore(db_path) as store:
        store.append("run", {"seq": 0})
    with SqliteStore(db_path) as store:
        assert store.load("run") == [{"seq": 0}]
    assert _master(db_path) == EXPECTED_SQL | OWN_SQL


@pytest.mark.clause("Q2")
def test_seq_guard_uses_the_format_index(db_path: str) -> None:
    """The A5 guard's range test is served by entries_run_seq, not a run scan."""
    from rulvar_store_sqlite._exact_seq import register_seq_functions
    from rulvar_store_sqlite._sql import INSERT_ENTRY_ABOVE_TAIL

    SqliteStore(db_path).close()
    conn = apsw.Connection(db_path)
    register_seq_functions(conn)
    plan = conn.execute(
        "EXPLAIN QUERY PLAN " + INSERT_ENTRY_ABOVE_TAIL, ("run", "{}", 3, "3")
    ).fetchall()
    conn.close()
    assert any("entries_run_seq" in str(row[3]) for row in plan), plan


def test_a_foreign_table_shape_is_refused(tmp_path: Path) -> None:
    """A file whose 'entries' table has other columns raises ConfigError."""
    path = str(tmp_path / "foreign.db")
    conn = apsw.Connection(path)
    conn.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    with pytest.raises(ConfigError, match="entries"):
        SqliteStore(path)


@pytest.mark.clause("Q3")
def test_file_database_runs_in_wal_mode(db_path: str) -> None:
    """journal_mode reads back 'wal' from any connection (it is persistent)."""
    SqliteStore(db_path).close()
    conn = apsw.Connection(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    conn.close()


@pytest.mark.clause("Q3")
def test_memory_database_answers_memory_journal_mode() -> None:
    """':memory:' cannot do WAL; the store accepts SQLite's 'memory' answer."""
    with SqliteStore(":memory:") as store:
        rows = store._door.read("test", "PRAGMA journal_mode", ())
        assert rows[0][0] == "memory"


@pytest.mark.parametrize(
    ("synchronous", "level"), [("FULL", 2), ("NORMAL", 1), ("normal", 1)]
)
def test_synchronous_option_is_applied_and_read_back(
    db_path: str, synchronous: str, level: int
) -> None:
    """The store's connection runs at the chosen synchronous level (default FULL)."""
    with SqliteStore(db_path, synchronous=synchronous) as store:  # type: ignore[arg-type]  # lower case accepted
        assert store._door.read("test", "PRAGMA synchronous", ())[0][0] == level
    with SqliteStore(db_path) as store:
        assert store.synchronous == "FULL"
        assert store._door.read("test", "PRAGMA synchronous", ())[0][0] == 2
