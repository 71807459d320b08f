"""The one transaction of every run-scoped mutation: ONE call of its server function.

Every mutation, hook or no hook, is the same transaction on the server: one
statement, ``SELECT rulvar_py_<op>(...)``, which takes the run's advisory lock,
evaluates the fence, performs the guarded mutation and returns its status
(``_schema``). Nothing else runs inside it; there is no second fence query and
no other statement.

What a failpoint hook changes is only where the transaction's end is marked.
Without a hook the connection is autocommit, so the statement is its own
implicit transaction: one message, one round trip, committed when the function
returns; it is sent as the statement the connection prepared for it
(``_calls``), the same text with its values bound. With a hook the same single statement runs between an explicit
``BEGIN`` and ``COMMIT``, so the moments of that transaction can be observed
from the client: ``after-begin`` (the block is open, nothing done),
``after-fence-check`` and ``before-commit`` (the function returned: the run's
lock is held, the fence was evaluated and the mutation is done, uncommitted),
``after-send`` (COMMIT sent, reply not read: the server alone decides) and
``after-commit``. A hook that kills the process at any of them therefore
kills the transaction users run, at that moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import generators, pq

from rulvar_store.backend import Failpoint, armed, hit
from rulvar_store_postgres._async_pool import AsyncConn
from rulvar_store_postgres._calls import (
    PreparedCall,
    call_prepared,
    call_prepared_async,
)
from rulvar_store_postgres._pool import Conn
from rulvar_store_postgres._primary import ReplicationUnconfirmed
from rulvar_store_postgres._schema import BEGIN, COMMIT

__all__ = [
    "commit_observed",
    "commit_observed_async",
    "confirmed",
    "hit_off_loop",
    "run_mutation",
    "run_mutation_async",
]


def confirmed(
    conn: Conn | AsyncConn, row: tuple[Any, ...] | None
) -> tuple[Any, ...] | None:
    """``row``, unless the commit's wait for a synchronous standby was cancelled (P17).

    PostgreSQL then reports the COMMIT as a success with a WARNING (a notice,
    ``_conn.cancelled_sync_wait``): committed on this server, maybe not on the
    standby a failover promotes. That is an unknown outcome, never a success.
    """
    if conn.sync_wait_cancelled:
        conn.sync_wait_cancelled = False
        raise ReplicationUnconfirmed(
            "the commit's wait for the synchronous standby was cancelled: it "
            "committed on this server but might not have been replicated"
        )
    return row


def run_mutation(
    conn: Conn,
    operation: str,
    call: str,
    args: Sequence[Any],
    prepared: PreparedCall | None = None,
) -> tuple[Any, ...] | None:
    """Run ``call`` (one operation function) as one transaction; return its row.

    ``prepared`` is the call's prepared form (``_calls``), used unless a hook
    is armed: the hooked transaction spans several statements, and a
    statement the server forgot could not be prepared again inside it.
    ``after-commit`` is left to the caller, outside any retry: whatever a hook
    does after the commit must never re-run the committed transaction.
    """
    conn.sync_wait_cancelled = False
    if not armed():
        if prepared is not None:
            return confirmed(conn, call_prepared(conn, prepared, args))
        return confirmed(conn, conn.call_cursor().execute(call, args).fetchone())
    cursor = conn.call_cursor()
    cursor.execute(BEGIN)
    try:
        hit(operation, "after-begin")
        row = cursor.execute(call, args).fetchone()
        hit(operation, "after-fence-check")
        hit(operation, "before-commit")
    except BaseException:
        # A lost connection must not hide the error that ended the transaction.
        with suppress(psycopg.Error):
            conn.rollback()
        raise
    commit_observed(conn, operation)
    return confirmed(conn, row)


def commit_observed(conn: Conn, operation: str) -> None:
    """COMMIT in two halves with ``after-send`` between: sent, reply not yet read.

    A client that dies at ``after-send`` leaves the outcome to the server alone
    (the kill points read it back from the store). psycopg has no public
    "send only" call, so the COMMIT goes through its libpq connection and its
    wait loop; the reply is checked like any statement's.
    """
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(COMMIT)
        conn.wait(generators.send(pgconn))
    try:
        hit(operation, "after-send")
    except BaseException:
        # A hook that raises (a test's fault) still leaves a clean connection:
        # the COMMIT's reply is read before the error goes up.
        with suppress(psycopg.Error), conn.lock:
            conn.wait(generators.fetch_many(pgconn))
        raise
    with conn.lock:
        results = conn.wait(generators.fetch_many(pgconn))
    _check_commit(results, conn.info.encoding)


def _check_commit(results: Sequence[pq.abc.PGresult], encoding: str) -> None:
    """Raise the server's error if the COMMIT's reply is not a success."""
    for result in results:
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result, encoding=encoding)


async def hit_off_loop(operation: str, point: Failpoint) -> None:
    """``hit`` for the asyncio store: the hook runs on a worker thread, never on the loop.

    A hook may pause its caller for seconds (the kit holds a write inside its
    window) or kill the process. Run on the loop, a pause would stop every other
    task with it: the competitor the kit races against the paused write, the
    cancel it sends, and the other transactions the loop has open, which the
    server then ends (``idle_in_transaction_session_timeout``). ``to_thread``
    runs the hook in a copy of the task's context, so a hook aimed at one
    caller (``caller_identity``) still finds that caller's hits.
    """
    if armed():
        await asyncio.to_thread(hit, operation, point)


async def run_mutation_async(
    conn: AsyncConn,
    operation: str,
    call: str,
    args: Sequence[Any],
    prepared: PreparedCall | None = None,
) -> tuple[Any, ...] | None:
    """``run_mutation`` for an asyncio connection: the same statements, awaited.

    The failpoints are hit off the loop (``hit_off_loop``), so a paused caller
    holds up only its own transaction, exactly like a paused thread on the sync
    store.
    """
    conn.sync_wait_cancelled = False
    if not armed():
        if prepared is not None:
            return confirmed(conn, await call_prepared_async(conn, prepared, args))
        cursor_ = await conn.call_cursor().execute(call, args)
        return confirmed(conn, await cursor_.fetchone())
    cursor = conn.call_cursor()
    await cursor.execute(BEGIN)
    try:
        await hit_off_loop(operation, "after-begin")
        row = await (await cursor.execute(call, args)).fetchone()
        await hit_off_loop(operation, "after-fence-check")
        await hit_off_loop(operation, "before-commit")
    except BaseException:
        with suppress(psycopg.Error):
            await conn.rollback()
        raise
    await commit_observed_async(conn, operation)
    return confirmed(conn, row)


async def commit_observed_async(conn: AsyncConn, operation: str) -> None:
    """``commit_observed`` for an asyncio connection."""
    pgconn = conn.pgconn
    pgconn.send_query(COMMIT)
    await conn.wait(generators.send(pgconn))
    try:
        await hit_off_loop(operation, "after-send")
    finally:
        # Read even when the hook raised, so the connection goes back clean.
        results = await conn.wait(generators.fetch_many(pgconn))
    _check_commit(results, conn.info.encoding)
