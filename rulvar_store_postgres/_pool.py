"""The bounded connection pool of one store (P7) and its fault behaviour.

``psycopg_pool.ConnectionPool`` with three adjustments:

* connections are autocommit and get their session settings
  (``_schema.session_setup``) once, when they are made;
* a failed connection attempt fails the clients waiting for a connection at
  once (a refused port is a fast ``StoreUnavailableError``, not a pool timeout),
  and the pool gives up retrying in the background right away, so the NEXT call
  makes a fresh attempt instead of waiting out an exponential backoff;
* ``checkout`` skips pooled connections the server has closed meanwhile
  (``pg_terminate_backend``, a restart, an idle timeout): a zero-cost poll of the
  socket, no round trip, and no backoff sleep between candidates.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._schema import session_setup

__all__ = [
    "Conn",
    "ConnectFailed",
    "StorePool",
    "closed_by_server",
    "connect_failure",
    "make_pool",
    "pool_setup",
]

Conn: TypeAlias = psycopg.Connection[TupleRow]


def _quiet_pool_logs() -> None:
    """Keep psycopg_pool's own log lines off stderr unless the application wants them.

    Without any handler on the way to the root, Python prints warnings through
    its last-resort handler, so a library user saw the pool's connection retries
    on stderr beside the typed error we raise. A ``NullHandler`` on the pool's
    logger ends that, while records still propagate to whatever handlers the
    application configured.
    """
    pool_logger = logging.getLogger("psycopg.pool")
    if not any(isinstance(h, logging.NullHandler) for h in pool_logger.handlers):
        pool_logger.addHandler(logging.NullHandler())


_quiet_pool_logs()


class ConnectFailed(psycopg.OperationalError):
    """No connection could be made: nothing of any call reached the server.

    Raised in place of the driver's own error (chained as ``__cause__``) so the
    translation can tell a refused or impossible connection, where nothing was
    sent, from a connection lost in the middle of a call.
    """


def connect_failure(exc: psycopg.Error) -> psycopg.Error:
    """What a failed connection attempt is reported as (see ``ConnectFailed``).

    A server-side refusal carries a SQLSTATE and is classified by it; the
    client-side failures (libpq options, DNS, socket) do not.
    """
    return exc if exc.sqlstate else ConnectFailed(str(exc))


class StorePool(ConnectionPool[Conn]):
    """A ConnectionPool whose connection failures reach waiting clients at once."""

    def _connect(self, timeout: float | None = None) -> Conn:
        try:
            return super()._connect(timeout)
        except psycopg.Error as exc:
            failure = connect_failure(exc)
            with self._lock:
                waiting = list(self._waiting)
            for client in waiting:
                client.fail(failure)
            if failure is exc:
                raise
            raise failure from exc

    @contextmanager
    def checkout(self) -> Iterator[Conn]:
        """Yield a live connection; stale pooled ones are discarded, not retried."""
        for _ in range(self.max_size + 1):
            conn = self.getconn()
            if not closed_by_server(conn):
                break
            conn.close()
            # Handed back the way the pool's own check does: counted as lost,
            # replaced in the background, no warning logged.
            self._putconn(conn, from_getconn=True)
        else:  # pragma: no cover - every candidate was stale; let the last one fail
            conn = self.getconn()
        try:
            yield conn
        finally:
            self.putconn(conn)


def closed_by_server(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> bool:
    """Whether the server has hung up: the socket is readable while idle.

    A zero-timeout poll, no round trip: the healthy path costs one system call.
    """
    if conn.closed or conn.broken:
        return True
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
            readable = bool(poller.poll(0))
        else:  # pragma: no cover - platforms without poll()
            readable = bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        return True
    # Anything arriving on an idle connection we never LISTEN on is, in practice,
    # the server's FATAL goodbye (terminate, shutdown, idle timeout) followed by
    # EOF. Discarding the rare harmless case costs one reconnect.
    return readable


def make_pool(settings: Settings, name: str) -> StorePool:
    """Build (not open) the pool of one store; ``readonly`` sessions refuse writes."""
    session, options = pool_setup(settings, name)

    def configure(conn: Conn) -> None:
        conn.execute(session)  # no parameters: one simple-protocol round trip

    return StorePool(conninfo=settings.conninfo, configure=configure, **options)


def pool_setup(settings: Settings, name: str) -> tuple[str, dict[str, Any]]:
    """The session statement and the pool settings of one store, sync or asyncio.

    The pool is built closed; every connection it makes is autocommit and runs
    the session statement once.
    """
    session = session_setup(
        settings.lock_timeout_ms,
        settings.idle_in_transaction_timeout_ms,
        settings.readonly,
    )
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": settings.connect_timeout_s,
        "fallback_application_name": "rulvar-store-postgres",
    }
    return session, {
        "kwargs": kwargs,
        "min_size": 1,
        "max_size": settings.pool_max_size,
        "open": False,
        "name": name,
        # A client waits this long for a free connection before StoreBusyError.
        "timeout": float(max(10, 2 * settings.connect_timeout_s)),
        "reconnect_timeout": 0.0,
        "num_workers": 2,
    }
