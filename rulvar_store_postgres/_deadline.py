"""The client-side bound of every PostgreSQL statement (P13, ``call_timeout_ms``).

libpq waits for a reply as long as the socket stays open. Over a stalled link
(a proxy or NAT that stops forwarding but keeps the connection) or a frozen
server (SIGSTOP, a hung VM) that is forever: TCP keepalives and
``tcp_user_timeout`` only help when the peer stops acknowledging, and a
stalled middlebox keeps acknowledging. So each checked-out connection is armed
with a deadline; past it, its socket is shut down (both directions). The
waiting statement then fails at once with a lost connection, the store raises
the retryable ``StoreUnavailableError`` (a write's outcome unknown), and the
pool discards the broken connection and makes a new one. The server ends
whatever it was doing by itself: an autocommit statement runs to its end, a
transaction left open is cut by ``idle_in_transaction_session_timeout``.

Sync connections share one watchdog thread per process (a lock and a dict per
call, no thread per call); asyncio connections use their loop's timer.
"""

from __future__ import annotations

import os
import socket
import threading
from contextlib import suppress
from time import monotonic
from typing import Any, Final

import psycopg

__all__ = ["DeadlinePassed", "Watchdog", "cut", "libpq_bounds", "watchdog"]


class DeadlinePassed(psycopg.OperationalError):
    """The statement had no reply within its bound: the connection was cut."""


def cut(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Shut the connection's socket down: a blocked read returns at once.

    Shutdown, not close: the descriptor stays psycopg's to close, so it can
    never be reused under it by another socket.
    """
    try:
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
    except (OSError, psycopg.Error, ValueError):
        return  # already closed: nothing is waiting on it
    with sock, suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def libpq_bounds(call_timeout_ms: int) -> dict[str, int]:
    """Keepalives and ``tcp_user_timeout``: the kernel gives up on a dead peer.

    They end a connection whose peer vanished (no acknowledgements) even while
    no statement runs; the deadline above covers what they cannot see.
    """
    idle_s = max(1, call_timeout_ms // 1000)
    return {
        "keepalives": 1,
        "keepalives_idle": idle_s,
        "keepalives_interval": 1,
        "keepalives_count": 3,
        "tcp_user_timeout": call_timeout_ms,
    }


class Watchdog:
    """One thread that cuts the connections whose deadline has passed."""

    def __init__(self) -> None:
        self._lock = threading.Condition(threading.Lock())
        self._armed: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._fired: set[int] = set()
        self._thread: threading.Thread | None = None
        self._wakes_at = float("inf")

    def arm(self, conn: psycopg.Connection[Any], seconds: float) -> None:
        """Cut ``conn`` in ``seconds`` unless ``disarm`` comes first."""
        deadline = monotonic() + seconds
        with self._lock:
            self._armed[id(conn)] = (deadline, conn)
            # The thread lives as long as the process (a fork resets this
            # watchdog, ``_reset_after_fork``), so no liveness check per call.
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rulvar-postgres-deadlines", daemon=True
                )
                self._thread.start()
            elif deadline < self._wakes_at:
                # Woken only when it would sleep past this deadline. A thread
                # already due earlier (an earlier call's deadline, since
                # disarmed) finds this one when it wakes: waking it on every
                # call cost a thread switch and a GIL hand-over per statement.
                self._lock.notify()

    def disarm(self, conn: psycopg.Connection[Any]) -> bool:
        """Stop watching ``conn``; return whether its deadline had cut it."""
        with self._lock:
            self._armed.pop(id(conn), None)
            if id(conn) in self._fired:
                self._fired.discard(id(conn))
                return True
            return False

    def _run(self) -> None:
        with self._lock:
            while True:
                now = monotonic()
                for key, (deadline, conn) in list(self._armed.items()):
                    if deadline <= now:
                        # Under the lock: the call cannot end (and its
                        # connection serve another call) while it is cut.
                        del self._armed[key]
                        self._fired.add(key)
                        cut(conn)
                if self._armed:
                    self._wakes_at = min(d for d, _ in self._armed.values())
                    self._lock.wait(max(0.0, self._wakes_at - now))
                else:
                    self._wakes_at = float("inf")
                    self._lock.wait()


watchdog: Final = Watchdog()


def _reset_after_fork() -> None:
    # The thread did not survive the fork and the lock may be held by it.
    watchdog.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_reset_after_fork)
