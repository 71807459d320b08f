"""The hot reads each pooled connection prepares and readies (``_reads``): same answers, never stuck.

A booted store readies its hot reads (blob get, get_meta, last_ref's and
get_under's range reads) on a connection before its first call: on the
boot's connection, and in the pool's ``configure`` for the ones made later.
These tests pin what that must not change: the answers are the cursor
path's, bytes and code points exact (T2, T12, T13, M5); a read the server
forgot (``DEALLOCATE ALL``) is prepared again, a name a failed warm-up left
taken is used as it is, and a new connection is readied afresh (P7); the
collation fallback's reads work prepared too (T12, T13); a read-only
handle readies them too (P3); ``prepared_statements=false`` prepares no
read at all (D15). The sync and the asyncio store alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._conn import StoreConnection

pytestmark = pytest.mark.postgres

PREPARED = "SELECT name FROM pg_prepared_statements ORDER BY name"
# What a booted store on a bytewise or a fallback ref column readies.
HOT = {"rulvar_rd_blob_get", "rulvar_rd_get_meta"}
BYTEWISE = {"rulvar_rd_last_ref", "rulvar_rd_get_under"}
FALLBACK = {"rulvar_rd_last_ref_run", "rulvar_rd_get_under_run"}
BLOB = bytes(range(256)) * 3  # every byte value, zeros included
REFS = ("run/c/a", "run/c/B", "run/c/a\U0010ffff", "run/c/a\u00e9/w", "other/c/z")


@contextmanager
def _borrowed(store: PostgresStore) -> Iterator[StoreConnection]:
    """The connection the store's next call would get, put back at exit."""
    conn = store._pool.getconn()
    try:
        yield conn
    finally:
        store._pool.putconn(conn)


def _names(conn: psycopg.Connection[Any]) -> set[str]:
    return {str(row[0]) for row in conn.execute(PREPARED).fetchall()}


def _ready_set(store: PostgresStore | AsyncPostgresStore) -> set[str]:
    bytewise = store._plans.refs_bytewise
    return HOT | (BYTEWISE if bytewise else FALLBACK)


def _fill(store: PostgresStore) -> None:
    blobs = store.transcripts()
    for ref in REFS:
        blobs.put(ref, BLOB + ref.encode())
    store.put_meta({"runId": "run", "status": "running", "name": "\u00e9\U0001f600"})


def _answers(store: PostgresStore) -> list[Any]:
    blobs = store.transcripts()
    return [
        blobs.get("run/c/a\U0010ffff"),
        blobs.get("run/none"),
        store.get_meta("run"),
        store.get_meta("none"),
        blobs.last_ref("run", "run/c/"),
        blobs.last_ref("run", "run/d/"),
        blobs.get_under("run", "run/c/a"),
        blobs.get_under("run", "run/x/"),
        blobs.list_refs("run"),
    ]


EXPECTED = [
    BLOB + "run/c/a\U0010ffff".encode(),
    None,
    {"runId": "run", "status": "running", "name": "\u00e9\U0001f600"},
    None,
    "run/c/a\U0010ffff",
    None,
    [
        (ref, BLOB + ref.encode())
        for ref in ("run/c/a", "run/c/a\u00e9/w", "run/c/a\U0010ffff")
    ],
    [],
    ["run/c/B", "run/c/a", "run/c/a\u00e9/w", "run/c/a\U0010ffff"],
]


@pytest.mark.clause("T13")
def test_prepared_reads_answer_as_the_cursor_path_does(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema) as store:
        _fill(store)
        prepared = _answers(store)
    with PostgresStore(
        f"{pg_url}?prepared_statements=false", schema=schema
    ) as unprepared:
        assert _answers(unprepared) == prepared == EXPECTED


@pytest.mark.clause("P7")
def test_the_boot_readies_the_hot_reads_on_the_connection_the_next_call_gets(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        store.get_meta("boot")
        with _borrowed(store) as conn:
            ready = _ready_set(store)
            assert ready <= _names(conn)
            assert {name.encode() for name in ready} <= conn.prepared_calls


@pytest.mark.clause("P7")
def test_a_connection_made_after_the_boot_is_readied_before_its_first_call(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        _fill(store)
        with _borrowed(store) as conn:
            pid = conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))
        with store._pool.checkout() as conn:
            # The pool replaced it; nothing has been sent on the new one yet.
            assert conn.info.backend_pid != pid
            assert _ready_set(store) <= _names(conn)
        assert _answers(store) == EXPECTED


@pytest.mark.clause("P7")
def test_a_read_the_server_forgot_is_prepared_again(pg_url: str, schema: str) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        _fill(store)
        with _borrowed(store) as conn:
            conn.execute("DEALLOCATE ALL")
            assert _names(conn) == set()
        assert _answers(store) == EXPECTED
        with _borrowed(store) as conn:
            assert _ready_set(store) <= _names(conn)


@pytest.mark.clause("P7")
def test_a_read_whose_name_a_failed_warm_up_left_taken_still_answers(
    pg_url: str, schema: str
) -> None:
    """PREPARE outlives a failed warm-up's transaction: the name counts as prepared."""
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        _fill(store)
        with _borrowed(store) as conn:
            conn.prepared_calls.clear()  # on the server, every name is still there
        assert _answers(store) == EXPECTED


@pytest.mark.clause("P7")
def test_an_async_read_the_server_forgot_is_prepared_again(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema) as filler:
        _fill(filler)

    async def scenario() -> tuple[list[Any], set[str], set[str]]:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
            await store.get_meta("boot")
            conn = await store._pool.getconn()
            try:
                ready = {
                    str(row[0])
                    for row in await (await conn.execute(PREPARED)).fetchall()
                }
                await conn.execute("DEALLOCATE ALL")
            finally:
                await store._pool.putconn(conn)
            blobs = store.transcripts()
            answers = [
                await blobs.get("run/c/a\U0010ffff"),
                await store.get_meta("run"),
                await blobs.last_ref("run", "run/c/"),
                await blobs.get_under("run", "run/c/a"),
            ]
            return answers, ready, _ready_set(store)

    answers, ready, expected_ready = asyncio.run(scenario())
    assert answers == [EXPECTED[0], EXPECTED[2], EXPECTED[4], EXPECTED[6]]
    assert expected_ready <= ready


@pytest.mark.clause("T12")
def test_the_collation_fallback_reads_answer_alike_prepared(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        _fill(store)
        store._plans.refs_bytewise = False  # as on an en_US or ICU column
        assert _answers(store) == EXPECTED
        with _borrowed(store) as conn:
            assert _names(conn) >= FALLBACK


@pytest.mark.clause("P3")
def test_a_read_only_handle_readies_its_reads_too(pg_url: str, schema: str) -> None:
    with PostgresStore(pg_url, schema=schema) as writer:
        _fill(writer)
    with PostgresStore(pg_url, schema=schema, readonly=True, pool_max_size=1) as reader:
        assert _answers(reader) == EXPECTED
        with _borrowed(reader) as conn:
            assert _ready_set(reader) <= _names(conn)


@pytest.mark.clause("D15")
def test_prepared_statements_false_prepares_no_read(pg_url: str, schema: str) -> None:
    with PostgresStore(
        f"{pg_url}?prepared_statements=false", schema=schema, pool_max_size=1
    ) as store:
        _fill(store)
        for _ in range(8):  # past psycopg's own threshold (5) for preparing
            assert _answers(store) == EXPECTED
        with _borrowed(store) as conn:
            assert _names(conn) == set()
            assert conn.prepared_calls == set()


@pytest.mark.clause("D15")
def test_async_prepared_statements_false_prepares_no_read(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema) as filler:
        _fill(filler)

    async def scenario() -> set[str]:
        async with AsyncPostgresStore(
            f"{pg_url}?prepared_statements=false", schema=schema, pool_max_size=1
        ) as store:
            blobs = store.transcripts()
            for _ in range(8):
                assert await blobs.last_ref("run", "run/c/") == EXPECTED[4]
                assert await blobs.get_under("run", "run/c/a") == EXPECTED[6]
            conn = await store._pool.getconn()
            try:
                rows = await (await conn.execute(PREPARED)).fetchall()
            finally:
                await store._pool.putconn(conn)
            return {str(row[0]) for row in rows}

    assert asyncio.run(scenario()) == set()


@pytest.mark.clause("P7")
def test_an_async_connection_made_after_the_boot_is_readied_before_its_first_call(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    async def scenario() -> tuple[int, int, set[str], set[str]]:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
            await store.get_meta("boot")
            conn = await store._pool.getconn()
            pid = conn.info.backend_pid
            await store._pool.putconn(conn)
            admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))
            async with store._pool.checkout() as conn:
                rows = await (await conn.execute(PREPARED)).fetchall()
                new_pid = conn.info.backend_pid
            return pid, new_pid, {str(row[0]) for row in rows}, _ready_set(store)

    pid, new_pid, names, ready = asyncio.run(scenario())
    assert new_pid != pid
    assert names >= ready
