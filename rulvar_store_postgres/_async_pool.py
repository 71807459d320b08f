"""The asyncio twin of ``_pool``: psycopg's ``AsyncConnectionPool``, same adjustments.

The same session settings, pool settings, fast failure of waiting clients on
a failed connection attempt, and skipping of connections the server closed
(``_pool`` holds the shared pieces). No lock serializes the pool: each call
checks its own connection out, so concurrent tasks use concurrent connections.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeAlias

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._pool import closed_by_server, connect_failure, pool_setup

__all__ = ["AsyncConn", "AsyncStorePool", "make_async_pool"]

AsyncConn: TypeAlias = psycopg.AsyncConnection[TupleRow]


class AsyncStorePool(AsyncConnectionPool[AsyncConn]):
    """An AsyncConnectionPool whose connection failures reach waiting clients at once."""

    async def _connect(self, timeout: float | None = None) -> AsyncConn:
        try:
            return await super()._connect(timeout)
        except psycopg.Error as exc:
            failure = connect_failure(exc)
            async with self._lock:
                waiting = list(self._waiting)
            for client in waiting:
                await client.fail(failure)
            if failure is exc:
                raise
            raise failure from exc

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


def make_async_pool(settings: Settings, name: str) -> AsyncStorePool:
    """Build (not open) the pool of one async store; ``readonly`` sessions refuse writes."""
    session, options = pool_setup(settings, name)

    async def configure(conn: AsyncConn) -> None:
        await conn.execute(session)  # no parameters: one simple-protocol round trip

    return AsyncStorePool(conninfo=settings.conninfo, configure=configure, **options)
