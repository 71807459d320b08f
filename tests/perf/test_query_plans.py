"""The read paths use an index on every backend with SQL (M4, M5, Q11, Q2, P2, J2).

``list_runs`` with a status or name filter, ``get_meta``, ``load`` and
``load_since`` must stay index lookups however many runs and entries there are
(issue 12: 100,000 runs). These tests capture the statement each read path
really sends (a spy on the store's one read helper) and ask the database for
its plan: ``EXPLAIN QUERY PLAN`` on SQLite, ``EXPLAIN`` with
``enable_seqscan = off`` on PostgreSQL. Only the format's own indexes are
needed (Appendix S/P): nothing is added to the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import RunFilter
from rulvar_store_sqlite import SqliteStore

STATUSES = ("running", "ok", "error", "suspended", "cancelled")


def spy(store: Any, *methods: str) -> list[tuple[str, Any]]:
    """Record (statement, parameters) of every call of the store's read helpers."""
    seen: list[tuple[str, Any]] = []
    for method in methods:
        real = getattr(store, method)

        def record(
            operation: str, statement: str, params: Any, real: Any = real
        ) -> Any:
            seen.append((statement, params))
            return real(operation, statement, params)

        setattr(store, method, record)
    return seen


READS: list[tuple[str, Callable[[Any], object], str]] = [
    ("list_runs status", lambda s: s.list_runs(RunFilter(status="running")), "status"),
    (
        "list_runs statuses",
        lambda s: s.list_runs(RunFilter(statuses=["ok", "error"])),
        "status",
    ),
    (
        "list_runs status+statuses",
        lambda s: s.list_runs(RunFilter(status="ok", statuses=["error"])),
        "status",
    ),
    ("list_runs name", lambda s: s.list_runs(RunFilter(name="job-7")), "name"),
    ("get_meta", lambda s: s.get_meta("run-00042"), "pk"),
    ("load", lambda s: s.load("run-00042"), "entries"),
    (
        "load_since",
        lambda s: s.load_since("run-00042", s.load_since("run-00042").cursor),
        "entries",
    ),
]


# -- SQLite -------------------------------------------------------------------------

SQLITE_INDEX = {
    "status": "USING INDEX meta_by_status",
    "name": "USING INDEX meta_by_name",
    "pk": "USING INDEX sqlite_autoindex_meta_1 (run_id=?)",
    "entries": "USING INDEX entries_by_run (run_id=?",
}


@pytest.fixture(scope="module")
def populated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    """3,000 runs with metas over five statuses and a few entries each."""
    path = str(Path(tmp_path_factory.mktemp("plans")) / "plans.db")
    with SqliteStore(path) as store:
        conn = store._conn
        with conn:
            for n in range(3000):
                run = f"run-{n:05d}"
                conn.execute(
                    "INSERT INTO meta (run_id, payload) VALUES (?, json_object("
                    "'runId', ?, 'status', ?, 'name', ?, 'updatedAt', 't'))",
                    (run, run, STATUSES[n % 5], f"job-{n % 100}"),
                )
                for seq in range(3):
                    conn.execute(
                        "INSERT INTO entries (run_id, payload) VALUES (?, ?)",
                        (run, f'{{"seq":{seq}}}'),
                    )
        yield store


@pytest.mark.clause("Q11")
@pytest.mark.clause("M5")
@pytest.mark.parametrize(("name", "read", "index"), READS, ids=[r[0] for r in READS])
def test_sqlite_read_paths_use_the_format_indexes(
    populated_sqlite: SqliteStore, name: str, read: Callable[[Any], object], index: str
) -> None:
    """Every statement of the read path is an index SEARCH, never a table SCAN."""
    store = populated_sqlite
    seen = spy(store._door, "read_values", "read")
    try:
        read(store)
    finally:
        del store._door.read_values, store._door.read  # back to the class's methods
    statements = [(s, p) for s, p in seen if "FROM" in s]
    assert statements, f"{name}: no statement captured"
    for statement, params in statements:
        plan = [
            row[3]
            for row in store._conn.execute(f"EXPLAIN QUERY PLAN {statement}", params)
        ]
        assert not any(step.startswith("SCAN") for step in plan), (name, plan)
        assert any(SQLITE_INDEX[index] in step for step in plan), (name, plan)


# -- PostgreSQL ----------------------------------------------------------------------

PG_INDEX = {
    "status": "rulvar_meta_by_status",
    "name": "rulvar_meta_by_name",
    "pk": "rulvar_meta_pkey",
    "entries": "rulvar_entries_by_run",
}


@pytest.fixture(scope="module")
def populated_postgres() -> Iterator[tuple[Any, Any]]:
    import secrets

    import psycopg

    from rulvar_store_postgres import PostgresStore
    from tests.perf.conftest import postgres_url

    url = postgres_url()
    schema = f"rulvar_plans_{secrets.token_hex(4)}"
    store = PostgresStore(url, schema=schema)
    admin = psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor)
    try:
        store.get_meta("boot")
        admin.execute(
            f'INSERT INTO "{schema}".rulvar_meta (run_id, payload) '
            "SELECT format('run-%s', lpad(n::text, 5, '0')), json_build_object("
            "'runId', format('run-%s', lpad(n::text, 5, '0')), 'status', "
            "(ARRAY['running','ok','error','suspended','cancelled'])[n % 5 + 1], "
            "'name', format('job-%s', n % 100), 'updatedAt', 't')::text "
            "FROM generate_series(0, 2999) AS n"
        )
        admin.execute(
            f'INSERT INTO "{schema}".rulvar_entries (run_id, payload) '
            "SELECT format('run-%s', lpad((n / 3)::text, 5, '0')), "
            "json_build_object('seq', n % 3)::text FROM generate_series(0, 8999) AS n"
        )
        admin.execute(f'ANALYZE "{schema}".rulvar_meta, "{schema}".rulvar_entries')
        yield store, admin
    finally:
        store.close()
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


@pytest.mark.postgres
@pytest.mark.clause("M5")
@pytest.mark.clause("P2")
@pytest.mark.parametrize(("name", "read", "index"), READS, ids=[r[0] for r in READS])
def test_postgres_read_paths_use_the_format_indexes(
    populated_postgres: tuple[Any, Any],
    name: str,
    read: Callable[[Any], object],
    index: str,
) -> None:
    """With sequential scans priced out, each read statement is planned on its index."""
    store, admin = populated_postgres
    seen: list[tuple[str, Any]] = []
    real_read = store._read

    def record(step: Any) -> Any:
        seen.append((step.statement, step.args))
        return real_read(step)

    store._read = record  # every read statement runs through _read(step)
    try:
        read(store)
    finally:
        del store._read
    assert seen, f"{name}: no statement captured"
    for statement, params in seen:
        with admin.transaction():
            admin.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(
                row[0] for row in admin.execute(f"EXPLAIN {statement}", params)
            )
        assert "Seq Scan" not in plan, (name, plan)
        assert PG_INDEX[index] in plan, (name, plan)
