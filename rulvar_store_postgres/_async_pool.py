"""The asyncio twin of ``_pool``: psycopg's ``AsyncConnectionPool``, same adjustments.

The same session settings, pool settings, fast failure of waiting clients on
a failed connection attempt, and skipping of connections the server closed
(``_pool`` holds the shared pieces). No lock serializes the pool: each call
checks its own connection out, so concurrent tasks use concurrent connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from time import monotonic
from types import TracebackType
from typing import Any, TypeAlias

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._conn import AsyncStoreConnection
from rulvar_store_postgres._deadline import cut
from rulvar_store_postgres._pool import (
    ConnectFailed,
    GrowthPause,
    admitted,
    closed_by_server,
    cluster_for,
    connect_failure,
    deadline_passed,
    discarded_why,
    idle_and_fresh,
    knows_idle_layout,
    lifo,
    no_connection_made,
    pool_options,
    session_for,
    session_settings,
    set_aside,
)
from rulvar_store_postgres._primary import PROBE, PROBE_EVERY_S, Cluster, NotPrimary
from rulvar_store_postgres._sessions import end_session, session_of

__all__ = [
    "AsyncCheckout",
    "AsyncConn",
    "AsyncStorePool",
    "LoopDeadlines",
    "make_async_pool",
]

AsyncConn: TypeAlias = AsyncStoreConnection


class LoopDeadlines:
    """The deadlines of one pool's checked-out connections, kept by ONE loop timer.

    A timer per call (``call_later`` then ``cancel``) left a cancelled handle in
    the loop's heap for the whole bound, so every call paid a heap push among
    thousands of dead timers. Here arming is a dict insert: all bounds are alike,
    so a new deadline is never earlier than the one the timer already waits for
    and nothing is scheduled; the timer, when it fires, cuts what has expired
    and waits for the earliest deadline left.
    """

    def __init__(self) -> None:
        self._armed: dict[int, tuple[float, AsyncConn, list[bool]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._wakes_at = float("inf")

    def arm(self, conn: AsyncConn, seconds: float) -> list[bool]:
        """Cut ``conn`` in ``seconds`` unless disarmed; the list records a cut."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        fired: list[bool] = []
        self._armed[id(conn)] = (deadline, conn, fired)
        if deadline < self._wakes_at:
            self._schedule(loop, deadline)
        return fired

    def disarm(self, conn: AsyncConn) -> None:
        self._armed.pop(id(conn), None)

    def _schedule(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._wakes_at = when
        self._timer = loop.call_at(when, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._wakes_at = None, float("inf")
        now = loop.time()
        for key, (deadline, conn, fired) in list(self._armed.items()):
            if deadline <= now:
                del self._armed[key]
                fired.append(True)
                cut(conn)
        if self._armed:
            self._schedule(loop, min(d for d, _, _ in self._armed.values()))


class AsyncStorePool(AsyncConnectionPool[AsyncConn]):
    """An AsyncConnectionPool whose connection failures reach waiting clients at once
    when no connection is left to serve them (``GrowthPause``)."""

    call_timeout_s: float = 10.0
    cluster: Cluster
    fenced: bool = True
    connect_timeout_s: int = 5

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._growth = GrowthPause()
        self._deadlines = LoopDeadlines()
        self._fast_idle = False
        super().__init__(*args, **kwargs)

    def _open(self) -> None:
        # psycopg_pool makes the async pool's lock when it opens, on the loop.
        super()._open()
        self._fast_idle = knows_idle_layout(self)

    async def _connect(self, timeout: float | None = None) -> AsyncConn:
        # One event loop: no await between reading and changing the counter.
        self._growth.in_flight += 1
        try:
            return await self._connect_to_primary(timeout)
        except psycopg.Error as exc:
            failure = connect_failure(exc)
            self._growth.failure = failure
            fail = self._growth.fails_waiters(self._nconns)
            waiting = list(self._waiting) if fail else []
            for client in waiting:
                await client.fail(failure)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            self._growth.in_flight -= 1

    async def _connect_to_primary(self, timeout: float | None) -> AsyncConn:
        """See ``StorePool._connect_to_primary``."""
        for attempt in range(self.cluster.hosts):
            try:
                return await super()._connect(timeout)
            except NotPrimary:
                if attempt + 1 == self.cluster.hosts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def reconnect_failed(self) -> None:
        # See StorePool.reconnect_failed.
        failure = self._growth.failure
        waiting = list(self._waiting) if self._nconns == 0 and failure else []
        for client in waiting:
            await client.fail(failure)  # type: ignore[arg-type]
        await super().reconnect_failed()

    def _maybe_grow_pool(self) -> None:
        # An empty pool always tries: with nothing to wait for, a caller must
        # get a fresh attempt (and its error), never a pool timeout.
        if self._nconns == 0 or not self._growth.paused():
            super()._maybe_grow_pool()

    async def _get_ready_connection(self, timeout: float | None) -> AsyncConn | None:
        # LIFO, as the sync pool (``lifo``); no await before the pop.
        lifo(self._pool)
        return await super()._get_ready_connection(timeout)

    def checkout(self, extra_s: float = 0.0) -> AsyncCheckout:
        """An async context manager that yields a live connection (``AsyncCheckout``)."""
        return AsyncCheckout(self, extra_s)

    def take_idle(self) -> AsyncConn | None:
        """``StorePool.take_idle`` on the loop: no await in it, so the pool's lock
        is only looked at (held across an await by another task: ``getconn``)."""
        if not self._fast_idle or self._closed or not self._pool or self._lock.locked():
            return None
        conn = self._pool.pop()  # the right end: returned last (``lifo``)
        if len(self._pool) < self._nconns_min:
            self._nconns_min = len(self._pool)
        self._stats[self._REQUESTS_NUM] += 1
        conn._pool = self
        return conn

    async def return_idle(self, conn: AsyncConn) -> None:
        """``putconn``, which for an idle connection nobody waits for is an append."""
        if self._fast_idle and idle_and_fresh(self, conn) and not self._lock.locked():
            conn._pool = None
            self._pool.append(conn)
            return
        await self.putconn(conn)

    async def live_connection(self, bound_s: float) -> AsyncConn:
        """A pooled connection the server has not closed; stale ones are discarded."""
        for _ in range(self.max_size + 1):
            conn = self.take_idle() or await self._bounded_getconn(bound_s)
            if not closed_by_server(conn) and self.cluster.current(conn.timeline):
                return conn
            await conn.close()
            await self._putconn(conn, from_getconn=True)
        # Every candidate was stale; let the last one fail.
        return await self._bounded_getconn(bound_s)  # pragma: no cover

    async def _bounded_getconn(self, bound_s: float) -> AsyncConn:
        """``getconn``; a timeout while no connection exists is ``ConnectFailed`` (P13)."""
        try:
            return await self.getconn(timeout=bound_s)
        except PoolTimeout as exc:
            # The loop's thread is the only one touching the counts.
            if self._nconns - self._growth.in_flight == 0:
                raise no_connection_made(bound_s) from exc
            raise


class AsyncCheckout:
    """One call's use of a pooled connection, bounded as ``Checkout`` is.

    The deadline is kept by the running loop (``LoopDeadlines``), which cuts
    the socket. A class, not an async generator: it runs around every
    statement.
    """

    __slots__ = ("_bound_s", "_conn", "_fired", "_pool")

    def __init__(self, pool: AsyncStorePool, extra_s: float) -> None:
        self._pool = pool
        self._bound_s = pool.call_timeout_s + extra_s
        self._conn: AsyncConn | None = None
        self._fired: list[bool] = []

    async def __aenter__(self) -> AsyncConn:
        pool = self._pool
        for attempt in (0, 1):
            conn = await pool.live_connection(pool.call_timeout_s)
            # No await between the checkout and the arming: nothing can cancel
            # this task in between, so the connection cannot be lost there.
            self._fired = pool._deadlines.arm(conn, self._bound_s)
            if monotonic() - conn.probed_at < PROBE_EVERY_S:
                break
            # Asked again under the call's deadline, as ``Checkout`` does.
            try:
                row = await (await conn.execute(PROBE)).fetchone()
                aside = set_aside(pool.cluster, conn, row, pool.fenced)
            except BaseException as exc:
                pool._deadlines.disarm(conn)
                await self._discard(conn, bool(self._fired))
                if self._fired and isinstance(exc, psycopg.Error):
                    raise deadline_passed(self._bound_s) from exc
                if isinstance(exc, psycopg.Error):
                    raise ConnectFailed(
                        "the pooled connection failed its check; nothing was sent"
                    ) from exc
                raise
            if not aside or attempt:
                break
            pool._deadlines.disarm(conn)
            await self._discard(conn, False)
        self._conn = conn
        return conn

    async def _discard(self, conn: AsyncConn, cut_off: bool) -> None:
        """Close and hand back ``conn``; a cut one's server session is ended too."""
        pool = self._pool
        session = session_of(conn, conn.started, conn.pid) if cut_off else None
        if cut_off:
            pool.cluster.demote(conn)
        await conn.close()
        await pool._putconn(conn, from_getconn=True)
        if session is not None:
            end_session(pool.cluster.conninfo(), session, pool.connect_timeout_s)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn, pool = self._conn, self._pool
        assert conn is not None
        self._conn = None
        pool._deadlines.disarm(conn)
        if self._fired:
            # Discarded the way a stale one is: replaced, no warning logged.
            await self._discard(conn, True)
            if isinstance(exc, psycopg.Error):
                raise deadline_passed(self._bound_s) from exc
            return
        # An observer's sessions are read-only by design: its 25006 stays ConfigError.
        why = discarded_why(exc) if pool.fenced else None
        if why is None:
            await pool.return_idle(conn)
            return
        pool.cluster.demote(conn)
        await self._discard(conn, False)
        if why is NotPrimary and not isinstance(exc, NotPrimary):
            raise NotPrimary(
                "the server became read-only under a pooled connection (demoted "
                "to a standby); nothing was written; retry, the pool tries the "
                "other hosts first"
            ) from exc


def make_async_pool(
    settings: Settings,
    name: str,
    ready: Callable[[AsyncConn], Awaitable[None]] | None = None,
) -> AsyncStorePool:
    """Build (not open) the pool of one async store (see ``make_pool``)."""
    session = session_for(settings)
    settings_text = session_settings(settings).encode()
    cluster = cluster_for(settings)

    async def configure(conn: AsyncConn) -> None:
        # No parameters: one simple-protocol round trip, the probe's answer last.
        conn.session_settings = settings_text
        cursor = await conn.execute(session)
        while cursor.nextset():
            pass
        try:
            admitted(cluster, conn, await cursor.fetchone())
        except BaseException:
            await conn.close()
            raise
        if ready is not None:
            await ready(conn)

    pool = AsyncStorePool(
        cluster.conninfo,
        configure=configure,
        connection_class=AsyncStoreConnection,
        **pool_options(settings, name),
    )
    pool.cluster, pool.fenced = cluster, not settings.readonly
    pool.call_timeout_s = settings.call_timeout_ms / 1000
    pool.connect_timeout_s = settings.connect_timeout_s
    return pool
