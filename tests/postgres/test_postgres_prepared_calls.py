"""The operation calls each pooled connection prepares (``_calls``): reused, never stuck.

A pooled connection prepares the statement of each operation call it sends
once and then only binds values to it. These tests pin what that must not
change: a statement the server forgot (``DEALLOCATE ALL``) or a new connection
(the old one was terminated) is prepared again and the write lands (P7); a
mutation the server refuses mid-statement (a lock wait past ``lock_timeout``)
is a typed retryable error and leaves the connection fit for the next call
(P7); a lone caller gets the connection it returned last, so it stays on the
one whose calls are prepared (P7); a boot that replaces the function bodies
under a prepared call leaves that call working (P3); ``prepared_statements=false`` prepares nothing at all
(D15). The sync and the asyncio store alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from rulvar_store.errors import ConfigError, JournalOrderViolation, StoreBusyError
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._calls import DRIVER_OFFERS_PREPARED_PATH
from rulvar_store_postgres._conn import StoreConnection
from rulvar_store_postgres._schema import LOCK_SEED

pytestmark = pytest.mark.postgres

APPEND = b"rulvar_py_append"
PREPARED = "SELECT name FROM pg_prepared_statements ORDER BY name"


def _hold_run_lock(admin: psycopg.Connection[Any], schema: str, run_id: str) -> None:
    """Take the run's transaction lock (the one every mutation of it waits for)."""
    admin.execute("BEGIN")
    admin.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))",
        (f"{schema}:{run_id}", LOCK_SEED),
    )


@contextmanager
def _borrowed(store: PostgresStore) -> Iterator[StoreConnection]:
    """One of the store's pooled connections, put back at exit."""
    conn = store._pool.getconn()
    try:
        yield conn
    finally:
        store._pool.putconn(conn)


def _prepared_names(conn: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in conn.execute(PREPARED).fetchall()]


@pytest.mark.clause("P7")
def test_a_refused_mutation_leaves_the_connection_and_its_prepared_call_usable(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresStore(
        pg_url, schema=schema, pool_max_size=1, lock_timeout_ms=200
    ) as store:
        store.append("r", {"seq": 0})
        conn = store._pool.getconn()
        store._pool.putconn(conn)
        _hold_run_lock(admin, schema, "r")
        try:
            with pytest.raises(StoreBusyError):
                store.append("r", {"seq": 1})
        finally:
            admin.execute("ROLLBACK")
        store.append("r", {"seq": 2})
        with _borrowed(store) as again:
            # The same connection served every call, its statement still prepared.
            assert again is conn
            assert APPEND in again.prepared_calls
            assert "rulvar_py_append" in _prepared_names(again)
        assert [e["seq"] for e in store.load("r")] == [0, 2]


@pytest.mark.clause("P7")
def test_a_refused_async_mutation_leaves_the_connection_and_its_prepared_call_usable(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    async def scenario() -> list[Any]:
        async with AsyncPostgresStore(
            pg_url, schema=schema, pool_max_size=1, lock_timeout_ms=200
        ) as store:
            await store.append("r", {"seq": 0})
            conn = await store._pool.getconn()
            await store._pool.putconn(conn)
            _hold_run_lock(admin, schema, "r")
            try:
                with pytest.raises(StoreBusyError):
                    await store.append("r", {"seq": 1})
            finally:
                admin.execute("ROLLBACK")
            await store.append("r", {"seq": 2})
            again = await store._pool.getconn()
            try:
                assert again is conn
                assert APPEND in again.prepared_calls
            finally:
                await store._pool.putconn(again)
            return [e["seq"] for e in await store.load("r")]

    assert asyncio.run(scenario()) == [0, 2]


@pytest.mark.clause("P7")
def test_a_call_the_server_forgot_is_prepared_again(pg_url: str, schema: str) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        lease = store.acquire("r", "me")
        store.append("r", {"seq": 0}, lease)
        with _borrowed(store) as conn:
            conn.execute("DEALLOCATE ALL")
            assert _prepared_names(conn) == []
            assert APPEND in conn.prepared_calls  # the connection does not know yet
        store.append("r", {"seq": 1}, lease)
        with _borrowed(store) as conn:
            assert "rulvar_py_append" in _prepared_names(conn)
        assert [e["seq"] for e in store.load("r")] == [0, 1]


@pytest.mark.clause("P7")
def test_an_async_call_the_server_forgot_is_prepared_again(
    pg_url: str, schema: str
) -> None:
    async def scenario() -> tuple[list[Any], list[str]]:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
            lease = await store.acquire("r", "me")
            await store.append("r", {"seq": 0}, lease)
            conn = await store._pool.getconn()
            try:
                await conn.execute("DEALLOCATE ALL")
            finally:
                await store._pool.putconn(conn)
            await store.append("r", {"seq": 1}, lease)
            conn = await store._pool.getconn()
            try:
                cursor = await conn.execute(PREPARED)
                names = [row[0] for row in await cursor.fetchall()]
            finally:
                await store._pool.putconn(conn)
            return [e["seq"] for e in await store.load("r")], names

    seqs, names = asyncio.run(scenario())
    assert seqs == [0, 1]
    assert "rulvar_py_append" in names


@pytest.mark.clause("P7")
def test_a_new_connection_prepares_its_calls_afresh(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        lease = store.acquire("r", "me")
        store.append("r", {"seq": 0}, lease)
        conn = store._pool.getconn()
        pid = conn.info.backend_pid
        store._pool.putconn(conn)
        # With a timeout the call returns once the backend has exited, so the
        # pool's check sees the connection closed.
        admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))
        store.append("r", {"seq": 1}, lease)
        with _borrowed(store) as conn:
            assert conn.info.backend_pid != pid
            assert APPEND in conn.prepared_calls
        assert [e["seq"] for e in store.load("r")] == [0, 1]


@pytest.mark.clause("P3")
def test_a_boot_replacing_the_functions_leaves_a_prepared_call_working(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        lease = store.acquire("r", "me")
        store.append("r", {"seq": 0}, lease)
        # Make the schema look booted by another version: the next boot
        # drops and creates every function again.
        admin.execute(
            f'COMMENT ON FUNCTION "{schema}".rulvar_py_append'
            "(text, text, numeric, text, bigint, bigint) IS 'older'"
        )
        with PostgresStore(pg_url, schema=schema) as other:
            other.get_meta("r")
        store.append("r", {"seq": 1}, lease)
        with pytest.raises(JournalOrderViolation):
            store.append("r", {"seq": 1}, lease)
        assert [e["seq"] for e in store.load("r")] == [0, 1]


@pytest.mark.clause("D15")
def test_prepared_statements_false_prepares_nothing(pg_url: str, schema: str) -> None:
    with PostgresStore(
        f"{pg_url}?prepared_statements=false", schema=schema, pool_max_size=1
    ) as store:
        lease = store.acquire("r", "me")
        for seq in range(8):  # past psycopg's own threshold (5) for preparing
            store.append("r", {"seq": seq}, lease)
        assert len(store.load("r")) == 8
        with _borrowed(store) as conn:
            assert _prepared_names(conn) == []
            assert conn.prepare_threshold is None


@pytest.mark.clause("D15")
def test_prepared_statements_takes_only_a_boolean(pg_url: str) -> None:
    with pytest.raises(ConfigError, match="prepared_statements"):
        PostgresStore(f"{pg_url}?prepared_statements=sometimes")


@pytest.mark.clause("P7")
def test_a_lone_caller_gets_the_connection_it_returned_last(
    pg_url: str, schema: str
) -> None:
    with PostgresStore(pg_url, schema=schema, pool_max_size=3) as store:
        store.get_meta("boot")
        first, second = store._pool.getconn(), store._pool.getconn()
        store._pool.putconn(first)
        store._pool.putconn(second)
        store.append("r", {"seq": 0})
        with _borrowed(store) as conn:
            # LIFO: the last one returned served the append and comes back next.
            assert conn is second
            assert APPEND in conn.prepared_calls
            assert APPEND not in first.prepared_calls


@pytest.mark.clause("P7")
def test_a_lone_async_caller_gets_the_connection_it_returned_last(
    pg_url: str, schema: str
) -> None:
    async def scenario() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=3) as store:
            await store.get_meta("boot")
            first = await store._pool.getconn()
            second = await store._pool.getconn()
            await store._pool.putconn(first)
            await store._pool.putconn(second)
            await store.append("r", {"seq": 0})
            conn = await store._pool.getconn()
            try:
                assert conn is second
                assert APPEND in conn.prepared_calls
                assert APPEND not in first.prepared_calls
            finally:
                await store._pool.putconn(conn)

    asyncio.run(scenario())


@pytest.mark.clause("P7")
def test_the_installed_psycopg_offers_what_the_prepared_path_uses(
    pg_url: str, schema: str
) -> None:
    """The path is not silently replaced by the cursor path on the pinned driver."""
    assert DRIVER_OFFERS_PREPARED_PATH
    with PostgresStore(pg_url, schema=schema) as store:
        assert store._prepared
