"""The asyncio twin of ``_pool``: psycopg's ``AsyncConnectionPool``, same adjustments.

The same session settings, pool settings, fast failure of waiting clients on
a failed connection attempt, and skipping of connections the server closed
(``_pool`` holds the shared pieces). No lock serializes the pool: each call
checks its own connection out, so concurrent tasks use concurrent connections.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from rulvar_store_postgres._log_mask import mask_in_logs
from rulvar_store_postgres._pool import (
    GrowthPause,
    closed_by_server,
    connect_failure,
    pool_options,
)
from rulvar_store_postgres._schema import session_setup

__all__ = ["AsyncConn", "AsyncStorePool", "make_async_pool"]

AsyncConn: TypeAlias = psycopg.AsyncConnection[TupleRow]


class AsyncStorePool(AsyncConnectionPool[AsyncConn]):
    """An AsyncConnectionPool whose connection failures reach waiting clients at once
    when no connection is left to serve them (``GrowthPause``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._growth = GrowthPause()
        super().__init__(*args, **kwargs)

    async def _connect(self, timeout: float | None = None) -> AsyncConn:
        # One event loop: no await between reading and changing the counter.
        self._growth.in_flight += 1
        try:
            return await super()._connect(timeout)
        except psycopg.Error as exc:
            failure = connect_failure(exc)
            fail = self._growth.fails_waiters(self._nconns)
            waiting = list(self._waiting) if fail else []
            for client in waiting:
                await client.fail(failure)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            self._growth.in_flight -= 1

    def _maybe_grow_pool(self) -> None:
        # An empty pool always tries: with nothing to wait for, a caller must
        # get a fresh attempt (and its error), never a pool timeout.
        if self._nconns == 0 or not self._growth.paused():
            super()._maybe_grow_pool()

    @asynccontextmanager
    async def checkout(self) -> AsyncIterator[AsyncConn]:
        """Yield a live connection; stale pooled ones are discarded, not retried."""
        for _ in range(self.max_size + 1):
            conn = await self.getconn()
            if not closed_by_server(conn):
                break
            await conn.close()
            await self._putconn(conn, from_getconn=True)
        else:  # pragma: no cover - every candidate was stale; let the last one fail
            conn = await self.getconn()
        try:
            yield conn
        finally:
            await self.putconn(conn)


def make_async_pool(
    conninfo: str,
    *,
    max_size: int,
    lock_timeout_ms: int,
    idle_in_transaction_timeout_ms: int,
    connect_timeout_s: int,
    name: str,
    readonly: bool = False,
    secrets: Sequence[str] = (),
) -> AsyncStorePool:
    """Build (not open) the pool of one async store; ``readonly`` sessions refuse writes."""
    session = session_setup(lock_timeout_ms, idle_in_transaction_timeout_ms, readonly)
    mask_in_logs(secrets)  # the pool logs libpq's messages: no password in them

    async def configure(conn: AsyncConn) -> None:
        await conn.execute(session)  # no parameters: one simple-protocol round trip

    return AsyncStorePool(
        conninfo,
        configure=configure,
        **pool_options(
            max_size=max_size, connect_timeout_s=connect_timeout_s, name=name
        ),
    )
