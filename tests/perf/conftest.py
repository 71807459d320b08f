"""Fixtures for the scale tests: one fresh store per backend (memory, file, SQLite, PostgreSQL).

PostgreSQL comes from ``RULVAR_TEST_POSTGRES_URL`` like in ``tests/postgres``:
without it the PostgreSQL cases skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from rulvar_store import JsonlFileStore, MemoryStore  # noqa: E402  (after the path setup)
from tests._postgres_gate import postgres_url as postgres_url  # noqa: E402

BACKENDS = (
    "memory",
    "file",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
)
StoreMaker = Callable[[], Any]


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """(url, fresh schema name); the schema is dropped afterwards."""
    import psycopg

    url = postgres_url()
    name = f"rulvar_perf_{secrets.token_hex(4)}"
    yield url, name
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreMaker]:
    """Open handles on one fresh location of the backend; all closed afterwards."""
    backend = request.param
    opened: list[Any] = []
    memory = MemoryStore()

    def make() -> Any:
        if backend == "memory":
            store: Any = MemoryStore.sharing(memory)
        elif backend == "file":
            store = JsonlFileStore(tmp_path / "runs")
        elif backend == "sqlite":
            from rulvar_store_sqlite import SqliteStore

            store = SqliteStore(str(tmp_path / "perf.db"))
        else:
            from rulvar_store_postgres import PostgresStore

            url, schema = request.getfixturevalue("pg_schema")
            store = PostgresStore(url, schema=schema)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
