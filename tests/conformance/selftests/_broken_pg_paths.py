"""Broken PostgreSQL stores of the fast paths' class: a cursor, a clock.

- ``TableTopCursor``: ``load_since`` hands back the table's highest id as the
  cursor ("nothing of this run is above it anyway"), so an append of the run
  still in flight below it (ids are issued at INSERT, not at COMMIT) is skipped.
- ``ClientClockLeases``: lease times (acquire, renew, the fence's "now") from
  the client host's clock instead of the server's.
- ``return_idle_past_waiters``: the pool's fast hand-back puts a connection
  among the idle ones while callers wait for one (patched into ``StorePool``).
- ``exchange_without_reprepare``: the prepared path trusts its note of what
  the session has prepared; a statement the server forgot (``DEALLOCATE
  ALL``) fails the call instead of being prepared again (patched into
  ``rulvar_store_postgres._calls._exchange``, so sync and asyncio alike).
- ``exchange_reprepares_without_settings``: prepares a forgotten statement
  again, but a session ``DISCARD ALL`` reset keeps the server's defaults
  (``lock_timeout`` 0: a call may wait on a run's lock forever).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from time import monotonic
from typing import Any, final

from psycopg.pq import TransactionStatus

from rulvar_store import JournalTail
from rulvar_store.backend import load_records
from rulvar_store_postgres import PostgresStore
from rulvar_store_postgres._calls import _failure, _params
from rulvar_store_postgres._plans import Step

__all__ = [
    "ClientClockLeases",
    "TableTopCursor",
    "async_return_idle_past_waiters",
    "exchange_reprepares_without_settings",
    "exchange_without_reprepare",
    "return_idle_past_waiters",
]

_IDLE = TransactionStatus.IDLE


@final
class TableTopCursor(PostgresStore):  # type: ignore[misc]  # final; the bug is the point
    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        after = 0 if cursor is None else int(cursor.split(":", 1)[1])
        table = f'"{self.schema}".rulvar_entries'
        rows: list[Any] = self._run(
            Step(
                "load_since",
                "rows",
                f"SELECT id, payload FROM {table} WHERE run_id = %s AND id > %s "
                "ORDER BY id",
                (run_id, after),
                lambda found: found,
            )
        )
        top: list[Any] = self._run(
            Step(
                "load_since",
                "rows",
                f"SELECT coalesce(max(id), 0) FROM {table}",
                (),
                lambda found: found,
            )
        )
        last = max([after, int(top[0][0]), *(int(row[0]) for row in rows)])
        return JournalTail(
            load_records([row[1] for row in rows]), f"postgresql:{last}", False
        )


def _client_now() -> int:
    return int(time.time() * 1000)


@final
class ClientClockLeases(PostgresStore):  # type: ignore[misc]  # final; the bug is the point
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kwargs.get("now") is None:
            # The bug: "the client knows the time" - every lease time from here.
            self._plans._now = _client_now


def return_idle_past_waiters(pool: Any, conn: Any) -> None:
    """``StorePool.return_idle`` with the bug: back among the idle ones, waiters or not.

    ("The fast path is for the common case; the waiters will find it.") A
    caller queued in ``getconn`` is only woken by ``putconn``: it times out
    beside the idle connection.
    """
    if idle_and_fresh_but_waiters(pool, conn):
        conn._pool = None
        with pool._lock:
            if not pool._closed:
                pool._pool.append(conn)
                return
        conn._pool = pool
    pool.putconn(conn)


def idle_and_fresh_but_waiters(pool: Any, conn: Any) -> bool:
    """``idle_and_fresh`` without its "nobody waiting" condition."""
    try:
        return bool(
            conn.pgconn.transaction_status == _IDLE
            and not pool._closed
            and conn._expire_at > monotonic()
        )
    except AttributeError:
        return False


async def async_return_idle_past_waiters(pool: Any, conn: Any) -> None:
    """``AsyncStorePool.return_idle`` with the same bug: waiting tasks are passed by."""
    if idle_and_fresh_but_waiters(pool, conn) and not pool._lock.locked():
        conn._pool = None
        pool._pool.append(conn)
        return
    await pool.putconn(conn)


def exchange_without_reprepare(
    conn: Any, call: Any, args: Sequence[Any], decode: Any
) -> Generator[None, Any, Any]:
    """``_calls._exchange`` with the bug: "a name we prepared stays prepared".

    The session's note is the only truth: a statement the server forgot
    (SQLSTATE 26000) raises to the caller instead of being prepared again.
    """
    encoding = conn.info.encoding
    params = _params(call, args, encoding)
    pgconn = conn.pgconn
    if call.name not in conn.prepared_calls:
        pgconn.send_prepare(call.name, call.text, param_types=call.types)
        failure = _failure((yield), encoding)
        if failure is not None and failure.sqlstate != "42P05":
            raise failure
        conn.prepared_calls.add(call.name)
    pgconn.send_query_prepared(
        call.name, params, param_formats=call.formats, result_format=call.result_format
    )
    results = yield
    failure = _failure(results, encoding)
    if failure is not None:
        raise failure
    return decode(results[-1], encoding)


def exchange_reprepares_without_settings(
    conn: Any, call: Any, args: Sequence[Any], decode: Any
) -> Generator[None, Any, Any]:
    """``_calls._exchange`` with the bug: "a forgotten statement is all DISCARD
    ALL took": it prepares again and sends again, the session's settings left
    at the server's defaults."""
    encoding = conn.info.encoding
    params = _params(call, args, encoding)
    pgconn = conn.pgconn
    retried = False
    while True:
        if call.name not in conn.prepared_calls:
            pgconn.send_prepare(call.name, call.text, param_types=call.types)
            failure = _failure((yield), encoding)
            if failure is not None and failure.sqlstate != "42P05":
                raise failure
            conn.prepared_calls.add(call.name)
        pgconn.send_query_prepared(
            call.name,
            params,
            param_formats=call.formats,
            result_format=call.result_format,
        )
        results = yield
        failure = _failure(results, encoding)
        if failure is None:
            return decode(results[-1], encoding)
        if failure.sqlstate != "26000" or retried:
            raise failure
        conn.prepared_calls.discard(call.name)
        retried = True
