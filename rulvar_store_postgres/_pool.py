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
from collections import deque
from collections.abc import Callable
from time import monotonic
from types import TracebackType
from typing import Any, Final, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._conn import AsyncStoreConnection, StoreConnection
from rulvar_store_postgres._deadline import DeadlinePassed, libpq_bounds, watchdog
from rulvar_store_postgres._log_mask import mask_in_logs
from rulvar_store_postgres._primary import (
    PROBE,
    PROBE_EVERY_S,
    Cluster,
    NotPrimary,
    Refused,
    ReplicationUnconfirmed,
    ServerState,
)
from rulvar_store_postgres._schema import session_setup
from rulvar_store_postgres._sessions import end_session, session_of

__all__ = [
    "READ_ONLY",
    "Checkout",
    "Conn",
    "ConnectFailed",
    "GrowthPause",
    "StorePool",
    "admitted",
    "closed_by_server",
    "cluster_for",
    "connect_failure",
    "deadline_passed",
    "discarded_why",
    "idle_and_fresh",
    "knows_idle_layout",
    "lifo",
    "make_pool",
    "no_connection_made",
    "pool_options",
    "session_for",
    "session_settings",
    "set_aside",
]

Conn: TypeAlias = StoreConnection


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


def no_connection_made(bound_s: float) -> ConnectFailed:
    """A wait for a connection that timed out while none existed: unreachable, not busy.

    Every connection was discarded (a stalled link cuts them) and the attempt to
    make a new one has not finished: no other caller holds a connection this one
    could have waited for, so the pool is not busy; the server is out of reach.
    """
    return ConnectFailed(
        f"no connection to the server could be made within {bound_s * 1000:.0f} ms "
        "(call_timeout_ms): the link or the server stalled, or nothing answers"
    )


def connect_failure(exc: psycopg.Error) -> psycopg.Error:
    """What a failed connection attempt is reported as (see ``ConnectFailed``).

    A server-side refusal carries a SQLSTATE and is classified by it; the
    client-side failures (libpq options, DNS, socket) do not. A server that
    is not the primary, or that the ``replication`` option refuses, keeps its
    own type (``_primary``).
    """
    if exc.sqlstate or isinstance(exc, NotPrimary | Refused):
        return exc
    return ConnectFailed(str(exc))


# SQLSTATE read_only_sql_transaction: the server turned read-only under a
# pooled connection (demoted to a standby, or default_transaction_read_only).
READ_ONLY: Final = "25006"


def admitted(cluster: Cluster, conn: Any, row: tuple[Any, ...] | None) -> ServerState:
    """Record a new connection's ``PROBE`` answer and let ``cluster`` judge it.

    Raises (the connection to be closed by the caller):
        NotPrimary, Refused: see ``Cluster.admit``.
    """
    state = ServerState.from_row(row)
    conn.timeline, conn.probed_at = state.timeline, monotonic()
    conn.pid = conn.info.backend_pid
    # A pooler in between (PgBouncer) shows the client a pid of its own: the
    # session behind it may serve other clients, so it is never ended.
    conn.started = state.started if state.pid == conn.pid else ""
    try:
        cluster.admit(state)
    except NotPrimary:
        cluster.demote(conn)
        raise
    cluster.prefer(conn)
    return state


def set_aside(
    cluster: Cluster, conn: Any, row: tuple[Any, ...] | None, fenced: bool
) -> bool:
    """Whether a pooled connection's fresh ``PROBE`` answer says: use another.

    Always in recovery (for a store that writes) or on a timeline behind the
    cluster's. A primary that may have been superseded is set aside too, at
    most once per ``SUSPECT_EVERY_S`` (a standby's restart must not
    turn every probe into a reconnect): a synchronous one without its
    synchronous standby (its commits cannot finish), or one that had standbys
    and has none left (after a failover they follow the new primary). Its
    host is then tried last; if no other host is the primary, the next
    connection comes back to it.
    """
    state = ServerState.from_row(row)
    conn.probed_at = monotonic()
    cluster.seen(state)
    if (state.in_recovery and fenced) or not cluster.current(state.timeline):
        cluster.demote(conn)
        return True
    if cluster.suspect(state):
        cluster.demote(conn)
        return True
    return False


def discarded_why(exc: BaseException | None) -> type[psycopg.Error] | None:
    """Whether a call's error means its connection's server is not the primary."""
    if isinstance(exc, ReplicationUnconfirmed | NotPrimary):
        return type(exc)
    if isinstance(exc, psycopg.Error) and exc.sqlstate == READ_ONLY:
        return NotPrimary
    return None


_IDLE: Final = psycopg.pq.TransactionStatus.IDLE

# After a refused attempt to grow, the pool waits this long before trying again,
# so a role or server connection limit is not hammered by every queued call.
GROW_PAUSE_S: Final = 1.0


class GrowthPause:
    """Whether a failed connection attempt ends the wait of the queued clients.

    It does only when no connection exists to serve them: the pool counts
    connections made and attempts in flight alike (``_nconns``), so the attempts
    in flight are counted here too and subtracted. Then a refused port or a
    wrong host still fails every waiting client at once, while a refusal to
    grow (a role's ``CONNECTION LIMIT``, the server's ``max_connections``)
    leaves them queued for the connections that exist, and growth pauses a
    moment before the next attempt.
    """

    def __init__(self) -> None:
        self._until = 0.0
        self.in_flight = 0
        self.failure: psycopg.Error | None = None  # the last failed attempt's

    def fails_waiters(self, nconns: int) -> bool:
        """After a failed attempt, still counted in ``nconns`` and ``in_flight``."""
        if nconns - self.in_flight > 0:
            self._until = monotonic() + GROW_PAUSE_S
            return False
        return True

    def paused(self) -> bool:
        return monotonic() < self._until


class StorePool(ConnectionPool[Conn]):
    """A ConnectionPool whose connection failures reach waiting clients at once
    when no connection exists to serve them (``GrowthPause``)."""

    call_timeout_s: float = 10.0
    cluster: Cluster
    fenced: bool = True
    connect_timeout_s: int = 5

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._growth = GrowthPause()
        super().__init__(*args, **kwargs)
        self._fast_idle = knows_idle_layout(self)

    def _connect(self, timeout: float | None = None) -> Conn:
        with self._lock:
            self._growth.in_flight += 1
        try:
            return self._connect_to_primary(timeout)
        except psycopg.Error as exc:
            failure = connect_failure(exc)
            with self._lock:
                self._growth.failure = failure
                fail = self._growth.fails_waiters(self._nconns)
                waiting = list(self._waiting) if fail else []
            for client in waiting:
                client.fail(failure)
            if failure is exc:
                raise
            raise failure from exc
        finally:
            with self._lock:
                self._growth.in_flight -= 1

    def _connect_to_primary(self, timeout: float | None) -> Conn:
        """A connection to the primary: a host found not to be it is tried last
        and the next host tried at once, each host once (``_primary``)."""
        for attempt in range(self.cluster.hosts):
            try:
                return super()._connect(timeout)
            except NotPrimary:
                if attempt + 1 == self.cluster.hosts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def reconnect_failed(self) -> None:
        # Called once a failed attempt is given up and uncounted. Attempts that
        # failed while another one waited for its retry each saw a connection
        # "left"; when none is, the queued clients get the last error now.
        with self._lock:
            failure = self._growth.failure
            waiting = list(self._waiting) if self._nconns == 0 and failure else []
        for client in waiting:
            client.fail(failure)  # type: ignore[arg-type]
        super().reconnect_failed()

    def _maybe_grow_pool(self) -> None:
        # An empty pool always tries: with nothing to wait for, a caller must
        # get a fresh attempt (and its error), never a pool timeout.
        if self._nconns == 0 or not self._growth.paused():
            super()._maybe_grow_pool()

    def _get_ready_connection(self, timeout: float | None) -> Conn | None:
        # LIFO (see ``lifo``); called under the pool's lock.
        lifo(self._pool)
        return super()._get_ready_connection(timeout)

    def checkout(self, extra_s: float = 0.0) -> Checkout:
        """A context manager that yields a live connection (see ``Checkout``)."""
        return Checkout(self, extra_s)

    def take_idle(self) -> Conn | None:
        """The most recently returned idle connection, taken as ``getconn`` takes it.

        ``getconn``'s common case without its layers (three log calls, a check
        loop, a timeout); ``None`` when none is ready, and ``getconn`` decides,
        waits or grows the pool as always.
        """
        if not self._fast_idle:
            return None
        with self._lock:
            if self._closed or not self._pool:
                return None
            conn = self._pool.pop()  # the right end: returned last (``lifo``)
            if len(self._pool) < self._nconns_min:
                self._nconns_min = len(self._pool)
        self._stats[self._REQUESTS_NUM] += 1
        conn._pool = self
        return conn

    def return_idle(self, conn: Conn) -> None:
        """``putconn``, which for an idle connection nobody waits for is an append."""
        if self._fast_idle and idle_and_fresh(self, conn):
            conn._pool = None
            with self._lock:
                if not self._closed and not self._waiting:
                    self._pool.append(conn)
                    return
            conn._pool = self
        self.putconn(conn)

    def live_connection(self, bound_s: float) -> Conn:
        """A pooled connection the server has not closed; stale ones are discarded."""
        for _ in range(self.max_size + 1):
            conn = self.take_idle() or self._bounded_getconn(bound_s)
            if not closed_by_server(conn) and self.cluster.current(conn.timeline):
                return conn
            conn.close()
            # Handed back the way the pool's own check does: counted as lost,
            # replaced in the background, no warning logged.
            self._putconn(conn, from_getconn=True)
        # Every candidate was stale; let the last one fail.
        return self._bounded_getconn(bound_s)  # pragma: no cover

    def _bounded_getconn(self, bound_s: float) -> Conn:
        """``getconn``; a timeout while no connection exists is ``ConnectFailed`` (P13)."""
        try:
            return self.getconn(timeout=bound_s)
        except PoolTimeout as exc:
            with self._lock:
                none_exists = self._nconns - self._growth.in_flight == 0
            if none_exists:
                raise no_connection_made(bound_s) from exc
            raise


class Checkout:
    """One call's use of a pooled connection, bounded (``StorePool.checkout``).

    The wait for a free connection and then the connection's use are each
    bounded by the call timeout (``extra_s`` more for a statement that may wait
    longer by design, the boot); past it the connection is cut (``_deadline``)
    and ``DeadlinePassed`` raised. A class, not a generator: it runs around
    every statement.
    """

    __slots__ = ("_bound_s", "_conn", "_pool")

    def __init__(self, pool: StorePool, extra_s: float) -> None:
        self._pool = pool
        self._bound_s = pool.call_timeout_s + extra_s
        self._conn: Conn | None = None

    def __enter__(self) -> Conn:
        pool = self._pool
        for attempt in (0, 1):
            conn = pool.live_connection(pool.call_timeout_s)
            try:
                watchdog.arm(conn, self._bound_s)
            except BaseException:
                pool.putconn(conn)
                raise
            if monotonic() - conn.probed_at < PROBE_EVERY_S:
                break
            # Asked again under the call's deadline (``_primary``).
            try:
                aside = set_aside(
                    pool.cluster, conn, conn.execute(PROBE).fetchone(), pool.fenced
                )
            except BaseException as exc:
                cut_off = watchdog.disarm(conn)
                self._discard(conn, cut_off)
                if cut_off and isinstance(exc, psycopg.Error):
                    raise deadline_passed(self._bound_s) from exc
                if isinstance(exc, psycopg.Error):
                    raise ConnectFailed(
                        "the pooled connection failed its check; nothing was sent"
                    ) from exc
                raise
            if not aside or attempt:
                break
            watchdog.disarm(conn)
            self._discard(conn, False)
        self._conn = conn
        return conn

    def _discard(self, conn: Conn, cut_off: bool) -> None:
        """Close and hand back ``conn``; a cut one's server session is ended too."""
        pool = self._pool
        session = session_of(conn, conn.started, conn.pid) if cut_off else None
        if cut_off:
            # Stalled past its deadline: try its host last (a zombie primary
            # whose commits wait for a standby it lost).
            pool.cluster.demote(conn)
        conn.close()
        pool._putconn(conn, from_getconn=True)
        if session is not None:
            end_session(pool.cluster.conninfo(), session, pool.connect_timeout_s)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn, pool = self._conn, self._pool
        assert conn is not None
        self._conn = None
        # Once disarm returns, the watchdog is done with the connection: a cut
        # happens under its lock, so none can follow the hand-back.
        cut_off = watchdog.disarm(conn)
        if cut_off:
            # Discarded the way a stale one is: replaced, no warning logged.
            self._discard(conn, True)
            if isinstance(exc, psycopg.Error):
                raise deadline_passed(self._bound_s) from exc
            return
        # An observer's sessions are read-only by design: its 25006 stays ConfigError.
        why = discarded_why(exc) if pool.fenced else None
        if why is None:
            pool.return_idle(conn)
            return
        pool.cluster.demote(conn)
        self._discard(conn, False)
        if why is NotPrimary and not isinstance(exc, NotPrimary):
            raise NotPrimary(
                "the server became read-only under a pooled connection (demoted "
                "to a standby); nothing was written; retry, the pool tries the "
                "other hosts first"
            ) from exc


def idle_and_fresh(pool: Any, conn: Any) -> bool:
    """Whether ``putconn`` would just put ``conn`` back in line (the fast return).

    Idle outside a transaction, the pool open, nobody waiting for a connection,
    the connection neither past its lifetime nor older than a ``drain``:
    ``putconn`` would then only append it to the idle ones. Anything else
    (and a psycopg_pool without these attributes) takes ``putconn``.
    """
    try:
        return bool(
            conn.pgconn.transaction_status == _IDLE
            and not pool._closed
            and not pool._waiting
            and pool._pool_full_event is None
            and conn._created_at > pool._drained_at
            and conn._expire_at > monotonic()
        )
    except AttributeError:  # pragma: no cover - another psycopg_pool layout
        return False


# What take_idle/return_idle and idle_and_fresh read or change inside a
# psycopg_pool pool (private, as of psycopg_pool 3.2 and 3.3).
_IDLE_LAYOUT: Final = (
    "_pool",
    "_lock",
    "_closed",
    "_waiting",
    "_nconns_min",
    "_stats",
    "_REQUESTS_NUM",
    "_pool_full_event",
    "_drained_at",
)


def knows_idle_layout(pool: Any) -> bool:
    """Whether ``pool`` has the private attributes the fast path uses.

    Checked once per pool: a psycopg_pool release that renames them turns the
    fast path off (every call takes ``getconn``/``putconn``) instead of failing.
    """
    return all(hasattr(pool, name) for name in _IDLE_LAYOUT) and isinstance(
        pool._pool, deque
    )


def lifo(idle: deque[Any]) -> None:
    """Put the most recently returned idle connection first in line.

    psycopg_pool hands out the connection idle the longest (it takes from the
    left, returns to the right). A lone caller then cycles through every
    connection a burst ever made, each with its own prepared statements and
    server caches to warm; taking the last returned one keeps it on one warm
    connection, and leaves the others idle at the left, where the pool's
    ``max_idle`` shrinking closes them first.
    """
    if len(idle) > 1:
        idle.rotate(1)


def deadline_passed(seconds: float) -> DeadlinePassed:
    """The error of a statement cut at its deadline (see ``_deadline``)."""
    return DeadlinePassed(
        f"no reply within {round(seconds * 1000)} ms (call_timeout_ms): the link "
        "or the server stalled; the connection was discarded"
    )


def closed_by_server(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> bool:
    """Whether the server has hung up: the socket is readable while idle.

    A zero-timeout poll, no round trip: the healthy path costs one system call.
    """
    if conn.closed or conn.broken:
        return True
    try:
        if hasattr(select, "poll"):
            readable = bool(_idle_poller(conn).poll(0))
        else:  # pragma: no cover - platforms without poll()
            readable = bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        return True
    # Anything arriving on an idle connection we never LISTEN on is, in practice,
    # the server's FATAL goodbye (terminate, shutdown, idle timeout) followed by
    # EOF. Discarding the rare harmless case costs one reconnect.
    return readable


def _idle_poller(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> select.poll:
    """The connection's poll object on its socket, registered once.

    A connection keeps its socket for life, so the registration made on its
    first checkout serves every later one: one system call per checkout.
    """
    poller: select.poll | None = getattr(conn, "idle_poller", None)
    if poller is None:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        if isinstance(conn, StoreConnection | AsyncStoreConnection):
            conn.idle_poller = poller
    return poller


def session_settings(settings: Settings) -> str:
    """The SETs every session of a store's pool gets (read-only ones refuse writes)."""
    return session_setup(
        settings.lock_timeout_ms,
        settings.idle_in_transaction_timeout_ms,
        settings.readonly,
    )


def session_for(settings: Settings) -> str:
    """What a new pooled connection runs first: its settings, then the probe of
    the server it reached; the pool logs libpq's messages, so its passwords are
    masked first."""
    mask_in_logs(settings.secrets)
    return f"{session_settings(settings)}; {PROBE}"


def make_pool(
    settings: Settings, name: str, ready: Callable[[Conn], None] | None = None
) -> StorePool:
    """Build (not open) the pool of one store; ``ready`` readies each new connection."""
    session = session_for(settings)
    settings_text = session_settings(settings).encode()
    cluster = cluster_for(settings)

    def configure(conn: Conn) -> None:
        # No parameters: one simple-protocol round trip, the probe's answer last.
        conn.session_settings = settings_text
        cursor = conn.execute(session)
        while cursor.nextset():
            pass
        try:
            admitted(cluster, conn, cursor.fetchone())
        except BaseException:
            conn.close()
            raise
        if ready is not None:
            ready(conn)

    pool = StorePool(
        cluster.conninfo,
        configure=configure,
        connection_class=StoreConnection,
        **pool_options(settings, name),
    )
    pool.cluster, pool.fenced = cluster, not settings.readonly
    pool.call_timeout_s = settings.call_timeout_ms / 1000
    pool.connect_timeout_s = settings.connect_timeout_s
    return pool


def cluster_for(settings: Settings) -> Cluster:
    """The ``Cluster`` of a new pool (both drivers)."""
    return Cluster(
        settings.conninfo,
        settings.where,
        replication=settings.replication,
        fenced=not settings.readonly,
    )


def pool_options(settings: Settings, name: str) -> dict[str, Any]:
    """The pool settings both stores use (sync and asyncio), built closed."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": settings.connect_timeout_s,
        "fallback_application_name": "rulvar-store-postgres",
    }
    if not settings.prepared_statements:
        # No statement of any kind is prepared, psycopg's own included: a
        # transaction-mode pooler may send the next one to another server session.
        kwargs["prepare_threshold"] = None
    # The URL's own keepalive or tcp_user_timeout settings win.
    given = conninfo_to_dict(settings.conninfo)
    kwargs.update(
        (key, value)
        for key, value in libpq_bounds(settings.call_timeout_ms).items()
        if key not in given
    )
    return {
        "kwargs": kwargs,
        "min_size": 1,
        "max_size": settings.pool_max_size,
        "open": False,
        "name": name,
        # A client waits at most this long for a free connection (StoreBusyError).
        "timeout": settings.call_timeout_ms / 1000,
        "reconnect_timeout": 0.0,
        "num_workers": 2,
    }
