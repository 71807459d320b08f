"""Rigs for the intake tests: per backend, stores with some state and a full dump.

Each rig holds a journal store and its blob store over one location, with a run
``good-run`` that has a meta record, one entry, one blob and (where leases exist)
a live lease. ``dump()`` reads everything the location holds straight from the
backing storage (the memory domain, the files, the SQLite tables, the PostgreSQL
tables), so a test can prove that a refused call persisted nothing.

PostgreSQL rigs need ``RULVAR_TEST_POSTGRES_URL``; without it they skip with the
reason (under ``CI=true`` they fail), as in ``tests/postgres``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import Lease, MemoryStore, open_store
from tests._postgres_gate import postgres_url as postgres_url

BACKENDS = ("memory", "file", "sqlite", "postgresql")
GOOD_RUN = "good-run"
GOOD_REF = "good-run/blob"


@dataclass
class Rig:
    """A backend's stores over one location, with known state and a dump of it."""

    backend: str
    journal: Any
    blobs: Any
    lease: Lease | None  # the live lease of GOOD_RUN; None where there are no leases
    dump: Callable[[], object]
    close: Callable[[], None]

    @property
    def leases(self) -> bool:
        return self.lease is not None


def _seed(journal: Any, blobs: Any, leases: bool) -> Lease | None:
    lease = journal.acquire(GOOD_RUN, "owner-a") if leases else None
    journal.put_meta({"runId": GOOD_RUN, "status": "running", "updatedAt": "t0"}, lease)
    journal.append(GOOD_RUN, {"seq": 1, "kind": "step"}, lease)
    blobs.put(GOOD_REF, b"blob-0", lease)
    return lease


def _memory_rig() -> Rig:
    store = MemoryStore()
    blobs = store.transcripts()
    domain = store._domain

    def dump() -> object:
        with domain.lock:
            return (
                {run: list(rows) for run, rows in domain.entries.items()},
                dict(domain.metas),
                {
                    run: (row.owner, row.epoch, row.expires_at)
                    for run, row in domain.leases.items()
                },
                dict(domain.epochs),
                dict(domain.blobs),
            )

    lease = _seed(store, blobs, leases=True)
    return Rig("memory", store, blobs, lease, dump, store.close)


def _file_rig(root: Path) -> Rig:
    opened = open_store(root.as_uri())

    def dump() -> object:
        if not root.exists():
            return []
        return sorted(
            (str(path.relative_to(root)), path.read_bytes() if path.is_file() else None)
            for path in root.rglob("*")
        )

    lease = _seed(opened.journal, opened.transcripts, leases=False)
    return Rig("file", opened.journal, opened.transcripts, lease, dump, opened.close)


_TABLES = ("entries", "meta", "leases", "epochs", "blobs")


def _sqlite_rig(path: Path) -> Rig:
    import apsw

    opened = open_store("sqlite:///" + str(path))

    def dump() -> object:
        reader = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return [
                reader.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                for table in _TABLES
            ]
        finally:
            reader.close()

    lease = _seed(opened.journal, opened.transcripts, leases=True)
    return Rig("sqlite", opened.journal, opened.transcripts, lease, dump, opened.close)


def _postgres_rig(url: str, schema: str) -> Rig:
    import psycopg

    opened = open_store(url, schema=schema)

    def dump() -> object:
        with psycopg.connect(url, autocommit=True) as conn:
            return [
                conn.execute(
                    f'SELECT * FROM "{schema}".rulvar_{table} ORDER BY 1'
                ).fetchall()
                for table in _TABLES
            ]

    lease = _seed(opened.journal, opened.transcripts, leases=True)
    return Rig(
        "postgresql", opened.journal, opened.transcripts, lease, dump, opened.close
    )


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def make_rig(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """Build, yield and tear down one rig of ``backend``."""
    cleanup: Callable[[], None] = lambda: None  # noqa: E731 - replaced per backend
    if backend == "memory":
        made = _memory_rig()
    elif backend == "file":
        made = _file_rig(tmp_path_factory.mktemp("intake-file") / "root")
    elif backend == "sqlite":
        made = _sqlite_rig(tmp_path_factory.mktemp("intake-sqlite") / "runs.db")
    else:
        url = postgres_url()
        schema = f"rulvar_intake_{secrets.token_hex(5)}"
        made = _postgres_rig(url, schema)

        def cleanup() -> None:
            _drop_schema(url, schema)

    try:
        yield made
    finally:
        made.close()
        cleanup()
