"""This process's liveness session: how a successor knows a holder died (L11).

Each process that takes leases keeps ONE extra connection per database, which
holds a session-level advisory lock on a random 63-bit key and then sits idle.
Every lease the process takes records that key (``rulvar_py_lease_holders``).
While the process lives, its session holds the lock; when it dies (SIGKILL,
crash, host gone), the server ends the session and releases the lock. A
successor's ``rulvar_py_acquire`` tries the holder's key: if the lock is free,
no session holds it, the holder is dead, and the live lease is taken over at
once instead of after its ttl.

The verdict can be wrong in one direction only: a holder that still runs but
whose liveness session the server closed (a network partition ended by TCP
keepalives, an administrator's ``pg_terminate_backend``, a failover to a server
without the session) is judged dead. The fence still refuses every write of
that holder from then on; what it can cost is a side effect done by both.

A process whose liveness session cannot be opened records no key: its leases
read as alive (unknown is never dead) and expire by their ttl as before.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import threading
import time
from typing import Any, Final

import psycopg

__all__ = ["liveness_key", "liveness_key_async"]

_lock = threading.Lock()
# (pid, conninfo) -> (the liveness connection, its key). Keyed by pid: a forked
# child never uses its parent's session (it would vouch for the parent).
_sessions: dict[tuple[int, str], tuple[psycopg.Connection[Any], int]] = {}
# When a (pid, conninfo) session last failed to open: retried after RETRY_S,
# not on every acquire.
_failed: dict[tuple[int, str], float] = {}
RETRY_S: Final = 10.0


@atexit.register
def _close_sessions() -> None:
    """Close this process's liveness sessions at exit (the server would anyway;
    closing them says goodbye instead of leaving psycopg to warn of them)."""
    with _lock:
        for (pid, _), (conn, _key) in list(_sessions.items()):
            if pid == os.getpid():
                conn.close()
        _sessions.clear()


def liveness_key(conninfo: str, connect_timeout_s: int) -> int | None:
    """This process's liveness key on the database ``conninfo`` names, or None.

    Opens the liveness session on first use (one connection per process and
    database); later calls cost a dictionary lookup and a local state check.
    """
    slot = (os.getpid(), conninfo)
    found = _sessions.get(slot)
    if found is not None and not found[0].closed and not found[0].broken:
        return found[1]
    with _lock:
        found = _sessions.get(slot)
        if found is not None and not found[0].closed and not found[0].broken:
            return found[1]
        if found is not None:
            found[0].close()  # broken or closed: let it go before its successor
        failed_at = _failed.get(slot)
        if failed_at is not None and time.monotonic() - failed_at < RETRY_S:
            return None
        key = secrets.randbits(63) or 1
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = psycopg.connect(
                conninfo,
                autocommit=True,
                connect_timeout=connect_timeout_s,
                application_name="rulvar-liveness",
            )
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        except psycopg.Error:
            if conn is not None:
                conn.close()
            _failed[slot] = time.monotonic()
            _sessions.pop(slot, None)
            return None
        _failed.pop(slot, None)
        _sessions[slot] = (conn, key)
        return key


async def liveness_key_async(conninfo: str, connect_timeout_s: int) -> int | None:
    """``liveness_key`` for asyncio code: the first call opens the session on a thread."""
    found = _sessions.get((os.getpid(), conninfo))
    if found is not None and not found[0].closed and not found[0].broken:
        return found[1]
    return await asyncio.to_thread(liveness_key, conninfo, connect_timeout_s)
