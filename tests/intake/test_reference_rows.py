"""Rows the TypeScript reference may have written stay readable (Appendix S, P).

The write rule refuses run ids such as ``"a/b"`` and ``""`` and, on PostgreSQL,
every seq that is not a JSON number (D5). A database shared with the reference
can still hold such rows: reads, listings and removals take them as they are.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import InvalidArgumentError, open_store
from tests.intake._rigs import postgres_url

Insert = Callable[[str, tuple[Any, ...]], object]

ENTRIES = [("a/b", '{"seq":1,"kind":"step"}'), ("", '{"seq":"1e3","kind":"x"}')]
METAS = [("a/b", '{"runId":"a/b","status":"ok","updatedAt":"t"}')]
BLOBS = [("/orphan", "", b"empty-run"), ("a/b/c", "a", b"nested")]


@pytest.fixture(params=["sqlite", "postgresql"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Stores over a location into which reference-style rows were written directly."""
    if request.param == "sqlite":
        import apsw

        path = tmp_path / "shared.db"
        opened = open_store("sqlite:///" + str(path))
        writer = apsw.Connection(str(path))
        run: Insert = lambda sql, args: writer.execute(sql, args)  # noqa: E731
        prefix, mark = "", "?"

        def cleanup() -> None:
            writer.close()
    else:
        import psycopg

        url = postgres_url()
        schema = f"rulvar_ref_{secrets.token_hex(5)}"
        opened = open_store(url, schema=schema)
        opened.journal.load("boot")  # the store creates its tables lazily
        conn = psycopg.connect(url, autocommit=True)
        run = lambda sql, args: conn.execute(sql, args)  # noqa: E731
        prefix, mark = f'"{schema}".rulvar_', "%s"

        def cleanup() -> None:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.close()

    marks = ", ".join([mark] * 2)
    for run_id, payload in ENTRIES:
        run(
            f"INSERT INTO {prefix}entries (run_id, payload) VALUES ({marks})",
            (run_id, payload),
        )
    for run_id, payload in METAS:
        run(
            f"INSERT INTO {prefix}meta (run_id, payload) VALUES ({marks})",
            (run_id, payload),
        )
    for ref, run_id, data in BLOBS:
        run(
            f"INSERT INTO {prefix}blobs (ref, run_id, data) VALUES ({marks}, {mark})",
            (ref, run_id, data),
        )
    try:
        yield opened.journal, opened.transcripts
    finally:
        opened.close()
        cleanup()


@pytest.mark.clause("D5")
def test_reference_rows_load_as_written(shared: tuple[Any, Any]) -> None:
    """Entries, metas and blobs under ids the write rule refuses are read unchanged."""
    journal, blobs = shared
    assert journal.load("a/b") == [{"seq": 1, "kind": "step"}]
    assert journal.load("") == [{"seq": "1e3", "kind": "x"}]
    assert journal.get_meta("a/b") == {"runId": "a/b", "status": "ok", "updatedAt": "t"}
    assert [meta["runId"] for meta in journal.list_runs()] == ["a/b"]
    assert blobs.get("/orphan") == b"empty-run"
    assert blobs.list_refs("a") == ["a/b/c"]
    assert blobs.list_refs("a/b") == ["a/b/c"]


def test_reference_rows_can_be_removed(shared: tuple[Any, Any]) -> None:
    """delete and blob delete take the reference's ids, so such runs can be cleaned up."""
    journal, blobs = shared
    journal.delete("a/b")
    journal.delete("")
    blobs.delete("/orphan")
    assert journal.load("a/b") == []
    assert journal.get_meta("a/b") is None
    assert journal.load("") == []
    assert blobs.get("/orphan") is None


def test_new_writes_under_reference_ids_are_refused(shared: tuple[Any, Any]) -> None:
    """The write rule still applies: no new state under an id it refuses."""
    journal, blobs = shared
    with pytest.raises(InvalidArgumentError):
        journal.append("a/b", {"seq": 2})
    with pytest.raises(InvalidArgumentError):
        journal.acquire("", "owner")
    with pytest.raises(InvalidArgumentError):
        blobs.put("/orphan", b"new")
    assert journal.load("a/b") == [{"seq": 1, "kind": "step"}]
