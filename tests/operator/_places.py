"""Store locations per backend for the operator tooling tests, and the CLI runner.

A ``Place`` is a location (memory domain, directory, SQLite file, PostgreSQL
schema) with a URL for the command line (``None`` for memory: every
``memory://`` open is a new empty domain), a way to open a writer handle on it,
a way to corrupt a run the way a crash or a foreign writer would, and, for SQLite
and PostgreSQL, a fingerprint of every stored byte (the read-only proofs).

PostgreSQL follows tests/postgres/conftest.py: the server comes from
``RULVAR_TEST_POSTGRES_URL``; without it the tests skip locally and fail under
``CI=true``. Each PostgreSQL place is a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import hashlib
import io
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rulvar_cli import main
from rulvar_store import MemoryStore, OpenedStore, open_store
from tests._postgres_gate import postgres_url as postgres_url

PG_TABLES = (
    ("rulvar_entries", "id"),
    ("rulvar_meta", "run_id"),
    ("rulvar_leases", "run_id"),
    ("rulvar_epochs", "run_id"),
    ("rulvar_blobs", "ref"),
)


def with_query(url: str, **options: str) -> str:
    joiner = "&" if "?" in url else "?"
    return url + joiner + "&".join(f"{key}={value}" for key, value in options.items())


@dataclass
class Place:
    """One store location of one backend, and what the tests do to it."""

    backend: str
    url: str | None
    opener: Callable[..., OpenedStore]
    corrupt_meta_text: Callable[[str, str], None] | None = None
    corrupt_journal: Callable[[str], None] | None = None
    # Stores an entry's text as another writer would: (run id, text).
    foreign_entry: Callable[[str, str], None] | None = None
    # Meta text this backend can hold that Python's json cannot parse (None: the
    # backend's own expression indexes refuse such a row, so it cannot occur).
    unparsable_meta: str | None = None
    fingerprint: Callable[[], str] | None = None
    admin_url: str | None = None
    schema: str | None = None
    path: Path | None = None
    _opened: list[OpenedStore] = field(default_factory=list)

    def open(self, **options: Any) -> OpenedStore:
        opened = self.opener(**options)
        self._opened.append(opened)
        return opened

    def close_all(self) -> None:
        for opened in self._opened:
            opened.close()


def _memory_place() -> Place:
    base = MemoryStore()

    def opener(**options: Any) -> OpenedStore:
        store = MemoryStore.sharing(base, **options)
        return OpenedStore(journal=store, transcripts=store.transcripts())

    return Place("memory", None, opener)


def _file_place(root: Path) -> Place:
    url = f"file://{root}"

    def corrupt_journal(run_id: str) -> None:
        path = root / run_id / "journal.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        # A bad line before the last is corruption, not a torn tail.
        path.write_bytes(lines[0] + b'{"seq": 1, "kind": \n' + b"".join(lines[1:]))

    def corrupt_meta_text(run_id: str, text: str) -> None:
        (root / run_id / "meta.json").write_text(text)

    def foreign_entry(run_id: str, text: str) -> None:
        with (root / run_id / "journal.jsonl").open("a", encoding="utf-8") as file:
            file.write(text + "\n")

    return Place(
        "file",
        url,
        lambda **options: open_store(url, **options),
        corrupt_meta_text=corrupt_meta_text,
        corrupt_journal=corrupt_journal,
        foreign_entry=foreign_entry,
        unparsable_meta='{"runId": "run-a", "status": ',
        path=root,
    )


def sqlite_fingerprint(path: Path) -> str:
    """sha256 over the database file and its WAL (an absent WAL counts as empty)."""
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        file = Path(str(path) + suffix)
        data = file.read_bytes() if file.exists() else b""
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _sqlite_place(path: Path) -> Place:
    url = f"sqlite:///{path}"

    def raw(sql: str, params: tuple[Any, ...]) -> None:
        import apsw

        conn = apsw.Connection(str(path))
        try:
            conn.execute(sql, params)
        finally:
            conn.close()

    return Place(
        "sqlite",
        url,
        lambda **options: open_store(url, **options),
        corrupt_meta_text=lambda run_id, text: raw(
            "UPDATE meta SET payload = ? WHERE run_id = ?", (text, run_id)
        ),
        # SQLite's JSON functions (and so its indexes) accept JSON5, Python does
        # not: what a foreign writer could leave behind.
        corrupt_journal=lambda run_id: raw(
            "INSERT INTO entries (run_id, payload) VALUES (?, ?)",
            (run_id, "{seq: 99, kind: 'step'}"),
        ),
        foreign_entry=lambda run_id, text: raw(
            "INSERT INTO entries (run_id, payload) VALUES (?, ?)", (run_id, text)
        ),
        unparsable_meta="{runId: 'run-a', status: 'ok'}",
        fingerprint=lambda: sqlite_fingerprint(path),
        path=path,
    )


def postgres_fingerprint(admin_url: str, schema: str) -> str:
    """sha256 over every row of the five tables, in key order."""
    import psycopg

    digest = hashlib.sha256()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for table, key in PG_TABLES:
            rows = conn.execute(
                f'SELECT t::text FROM "{schema}".{table} t ORDER BY {key}'
            ).fetchall()
            digest.update(f"{table}:{len(rows)}\n".encode())
            for (row,) in rows:
                digest.update(row.encode() + b"\n")
    return digest.hexdigest()


def _postgres_place(admin_url: str, schema: str) -> Place:
    import psycopg

    url = with_query(admin_url, schema=schema)

    def raw(sql: str, params: tuple[Any, ...]) -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql, params)

    return Place(
        "postgres",
        url,
        lambda **options: open_store(url, **options),
        corrupt_meta_text=lambda run_id, text: raw(
            f'UPDATE "{schema}".rulvar_meta SET payload = %s WHERE run_id = %s',
            (text, run_id),
        ),
        # jsonb casts in the indexes refuse text that is not JSON; an entry that
        # is JSON but not an object gets through.
        corrupt_journal=lambda run_id: raw(
            f'INSERT INTO "{schema}".rulvar_entries (run_id, payload) VALUES (%s, %s)',
            (run_id, "[99, 100]"),
        ),
        foreign_entry=lambda run_id, text: raw(
            f'INSERT INTO "{schema}".rulvar_entries (run_id, payload) VALUES (%s, %s)',
            (run_id, text),
        ),
        fingerprint=lambda: postgres_fingerprint(admin_url, schema),
        admin_url=admin_url,
        schema=schema,
    )


def drop_schema(admin_url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _make_place(backend: str, tmp_path: Path) -> Iterator[Place]:
    if backend == "memory":
        place = _memory_place()
    elif backend == "file":
        place = _file_place(tmp_path / "files")
    elif backend == "sqlite":
        place = _sqlite_place(tmp_path / "runs.db")
    else:
        admin_url = postgres_url()
        schema = f"rulvar_op_{secrets.token_hex(5)}"
        place = _postgres_place(admin_url, schema)
    try:
        yield place
    finally:
        place.close_all()
        if place.schema is not None and place.admin_url is not None:
            drop_schema(place.admin_url, place.schema)


@pytest.fixture(params=["memory", "file", "sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A fresh location of each backend in turn."""
    yield from _make_place(request.param, tmp_path)


@pytest.fixture(params=["file", "sqlite", "postgres"])
def url_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A fresh location with a URL the command line can open (no memory)."""
    yield from _make_place(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def byte_place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """A fresh SQLite file or PostgreSQL schema, with a fingerprint of its bytes."""
    yield from _make_place(request.param, tmp_path)


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def invoke(*args: str) -> CliResult:
    """Run ``rulvar ARGS`` in this process through ``main`` (exit codes as shipped)."""
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, _text(out), _text(err))


def _text(stream: io.BytesIO) -> str:
    return stream.getvalue().decode("utf-8", errors="replace")


@pytest.fixture
def rulvar() -> Callable[..., CliResult]:
    """The ``rulvar`` command, run in-process."""
    return invoke
