"""The mutation cursor each pooled connection keeps (``_conn``): reused, never stuck.

A pooled connection runs every mutation through one cursor it keeps (no new
cursor per call). These tests pin what that must not change: a mutation the
server refuses mid-statement (a lock wait past ``lock_timeout``) is a typed
retryable error and leaves the connection and its cursor fit for the next
call (P7); the sync and the asyncio store alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from rulvar_store.errors import StoreBusyError
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._schema import LOCK_SEED

pytestmark = pytest.mark.postgres


def _hold_run_lock(admin: psycopg.Connection[Any], schema: str, run_id: str) -> None:
    """Take the run's transaction lock (the one every mutation of it waits for)."""
    admin.execute("BEGIN")
    admin.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))",
        (f"{schema}:{run_id}", LOCK_SEED),
    )


@pytest.mark.clause("P7")
def test_a_refused_mutation_leaves_the_kept_cursor_usable(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresStore(
        pg_url, schema=schema, pool_max_size=1, lock_timeout_ms=200
    ) as store:
        store.append("r", {"seq": 0})
        conn = store._pool.getconn()
        kept = conn.call_cursor()
        store._pool.putconn(conn)
        store.append("r", {"seq": 1})
        _hold_run_lock(admin, schema, "r")
        try:
            with pytest.raises(StoreBusyError):
                store.append("r", {"seq": 2})
        finally:
            admin.execute("ROLLBACK")
        store.append("r", {"seq": 3})
        conn = store._pool.getconn()
        try:
            # The same connection and the same cursor served every call.
            assert conn.call_cursor() is kept
        finally:
            store._pool.putconn(conn)
        assert [e["seq"] for e in store.load("r")] == [0, 1, 3]


@pytest.mark.clause("P7")
def test_a_refused_mutation_leaves_the_kept_async_cursor_usable(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    async def scenario() -> list[Any]:
        async with AsyncPostgresStore(
            pg_url, schema=schema, pool_max_size=1, lock_timeout_ms=200
        ) as store:
            await store.append("r", {"seq": 0})
            conn = await store._pool.getconn()
            kept = conn.call_cursor()
            await store._pool.putconn(conn)
            _hold_run_lock(admin, schema, "r")
            try:
                with pytest.raises(StoreBusyError):
                    await store.append("r", {"seq": 1})
            finally:
                admin.execute("ROLLBACK")
            await store.append("r", {"seq": 2})
            conn = await store._pool.getconn()
            try:
                assert conn.call_cursor() is kept
            finally:
                await store._pool.putconn(conn)
            return [e["seq"] for e in await store.load("r")]

    assert asyncio.run(scenario()) == [0, 2]
