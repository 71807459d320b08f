"""End the server session of a connection cut at its deadline (P19).

Cutting the socket (``_deadline``) ends the client's wait, not the server's:
a backend waiting for a synchronous standby does not notice a closed client
and waits on, holding the run's lock, and ``statement_timeout`` is not armed
during a COMMIT. So the session is ended from a fresh connection to the same
server, with ``pg_terminate_backend``: the backend then stops waiting, and
PostgreSQL reports nothing to the client it no longer has (the commit, if it
was local, stays an unknown outcome for the caller, never a success).

Behind a pooler (PgBouncer) the server session may serve other clients:
the pid the client was told is then the pooler's, not the server's
(``_pool.admitted`` compares them), and no session is ended.

Run on a daemon thread, bounded by ``connect_timeout``: the caller gets its
error at its deadline, whether or not the server is reachable (a frozen
server cannot be asked; its session ends when it thaws, cut off by
``idle_in_transaction_session_timeout`` or its TCP timeouts).
"""

from __future__ import annotations

import threading
from contextlib import suppress
from typing import Any, Final

import psycopg
from psycopg.conninfo import make_conninfo

__all__ = ["Session", "end_session", "session_of", "wait_ended"]

# Sessions being ended (tests wait for them).
_pending: Final[set[threading.Thread]] = set()
_lock: Final = threading.Lock()


class Session:
    """Where a connection's server session lives: enough to end it later."""

    __slots__ = ("host", "hostaddr", "pid", "port", "started")

    def __init__(
        self, host: str, hostaddr: str, port: str, pid: int, started: str
    ) -> None:
        self.host, self.hostaddr, self.port = host, hostaddr, port
        self.pid, self.started = pid, started


def session_of(
    conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], started: str, pid: int
) -> Session | None:
    """Where ``conn``'s session is; ``pid`` as read while it was connected."""
    try:
        info = conn.info
        hostaddr = ""
        with suppress(psycopg.Error):
            hostaddr = info.hostaddr
        return Session(info.host, hostaddr, str(info.port), pid, started)
    except (psycopg.Error, ValueError):
        return None


def _terminate(conninfo: str, session: Session, connect_timeout_s: int) -> None:
    target = {"host": session.host, "port": session.port}
    if session.hostaddr:
        target["hostaddr"] = session.hostaddr
    with (
        suppress(psycopg.Error, OSError),
        psycopg.connect(
            make_conninfo(
                conninfo,
                **target,
                target_session_attrs="any",
                connect_timeout=connect_timeout_s,
            ),
            autocommit=True,
        ) as conn,
    ):
        # backend_start too: a pid the server has since given to another
        # session is left alone.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid = %s AND backend_start::text = %s",
            (session.pid, session.started),
        )


def end_session(conninfo: str, session: Session | None, connect_timeout_s: int) -> None:
    """End ``session`` on its server, from a daemon thread (see the module text)."""
    if session is None or not session.started or not session.pid:
        return

    def run() -> None:
        try:
            _terminate(conninfo, session, connect_timeout_s)
        finally:
            with _lock:
                _pending.discard(thread)

    thread = threading.Thread(
        target=run, name="rulvar-postgres-end-session", daemon=True
    )
    with _lock:
        _pending.add(thread)
    thread.start()


def wait_ended(timeout_s: float) -> None:
    """Wait for the sessions being ended (tests)."""
    with _lock:
        threads = list(_pending)
    for thread in threads:
        thread.join(timeout_s)
