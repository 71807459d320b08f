"""The prepared call path of the operation functions, one per pooled connection.

Every run-scoped mutation sends one of a few statements (``SELECT
rulvar_py_append($1, ...)`` and its siblings, ``_schema.Sql.calls``), only the
values change. Each pooled connection prepares a statement the first time it
sends it, under a fixed name, with the parameter types declared, and from then
on sends only Bind/Execute: the server skips parsing and planning, and the
client skips psycopg's per-execute work (query conversion, dumper lookups, its
own prepare bookkeeping), since the values are written here as the text the
declared types read (``str``, ``int`` and ``Decimal`` only, as ``_plans`` builds
them) and a blob as binary ``bytea``.

The server may forget a statement behind the connection's back (``DEALLOCATE
ALL``, ``DISCARD ALL``): its call then fails with SQLSTATE 26000 before running
anything, and is prepared again and sent once more, after the session's
settings (which ``DISCARD ALL`` resets too) are set again. A new connection (the pool
replaced a lost one) starts with nothing prepared. Where preparing cannot be
used (``prepared_statements=false`` for a pooler that does not keep them, an
armed failpoint hook, a call with no fixed text) the cursor path of
``_transaction`` runs instead, with the same statement text. The hot reads
take this path too (``_reads``), each with its own decoding of the result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import psycopg
from psycopg import generators, pq
from psycopg.abc import PQGen

from rulvar_store_postgres._conn import AsyncStoreConnection, StoreConnection
from rulvar_store_postgres._schema import Sql
from rulvar_store_postgres._uncancelled import Uncancellable

__all__ = [
    "DRIVER_OFFERS_PREPARED_PATH",
    "PreparedCall",
    "call_prepared",
    "call_prepared_async",
    "prepared_calls",
    "run_prepared",
    "run_prepared_async",
]

T = TypeVar("T")

# This path talks to psycopg below its documented surface (the libpq wrapper,
# its wait generators, error_from_result). A psycopg release without one of
# them gets the cursor path instead of an AttributeError mid-write.
DRIVER_OFFERS_PREPARED_PATH: Final = all(
    hasattr(owner, name)
    for owner, name in (
        (generators, "execute"),
        (psycopg.Connection, "wait"),
        (psycopg.errors, "error_from_result"),
        (pq.PGconn, "send_prepare"),
        (pq.PGconn, "send_query_prepared"),
    )
)

# The argument types of the operation functions, as PostgreSQL type oids.
_OIDS: Final = {
    "text": 25,
    "numeric": 1700,
    "bigint": 20,
    "bytea": 17,
    "boolean": 16,  # its text form: str(True) reads as true
}
# SQLSTATE invalid_sql_statement_name: "prepared statement ... does not exist".
_FORGOTTEN: Final = "26000"
# SQLSTATE duplicate_prepared_statement: the name is taken in this session.
_TAKEN: Final = "42P05"
_TUPLES_OK: Final = pq.ExecStatus.TUPLES_OK
_COMMAND_OK: Final = pq.ExecStatus.COMMAND_OK
# What psycopg's generators ask to wait for, and what they are told is ready
# (its Wait and Ready flags, the selectors' event bits).
_WAIT_R: Final = 1
_WAIT_W: Final = 2


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """One operation call as a named server-side statement."""

    name: bytes
    text: bytes  # the statement with $n placeholders
    types: tuple[int, ...]
    formats: tuple[int, ...]  # per parameter: 1 = binary (bytea), 0 = text
    # 0: text (an operation call's integer); 1: binary (a read's columns, ``_reads``).
    result_format: int = 0


def prepared_calls(sql: Sql) -> dict[str, PreparedCall]:
    """The prepared form of each operation call of ``sql``, keyed by the call's text."""
    calls = {}
    for text, (function, kinds) in sql.calls.items():
        marks = ", ".join(f"${n}::{kind}" for n, kind in enumerate(kinds, 1))
        calls[text] = PreparedCall(
            # The prefix Appendix P reserves for our objects; one store per pool,
            # so one statement per function and connection.
            name=function.encode(),
            text=f"SELECT {sql.quoted}.{function}({marks})".encode(),
            types=tuple(_OIDS[kind] for kind in kinds),
            formats=tuple(int(kind == "bytea") for kind in kinds),
        )
    return calls


def _params(
    call: PreparedCall, args: Sequence[Any], encoding: str
) -> list[bytes | None]:
    """The arguments as the bytes the declared types read."""
    params: list[bytes | None] = []
    for value, binary in zip(args, call.formats, strict=True):
        if value is None:
            params.append(None)
        elif binary:
            params.append(value if isinstance(value, bytes) else bytes(value))
        elif isinstance(value, str):
            params.append(value.encode(encoding))
        else:
            # An int or a Decimal: its str() is a valid bigint or numeric literal.
            params.append(str(value).encode())
    return params


def _failure(results: Sequence[pq.abc.PGresult], encoding: str) -> psycopg.Error | None:
    """The server's error among ``results``, if any, as psycopg raises it."""
    for result in results:
        if result.status not in (_TUPLES_OK, _COMMAND_OK):
            return psycopg.errors.error_from_result(result, encoding=encoding)
    return None


def _row(result: pq.abc.PGresult, encoding: str) -> tuple[Any, ...] | None:
    """The call's one-integer row (``None`` when the server returned no row)."""
    if result.ntuples == 0:
        return None
    value = result.get_value(0, 0)
    return (None if value is None else int(value),)


# One exchange of a prepared statement, written once for both drivers: it
# sends on ``pgconn`` and yields for the results of what it sent; the sync and
# asyncio drivers below only differ in how they wait for those results.
_Exchange = Generator[None, list[pq.abc.PGresult], T]
# What a statement's last result becomes (the result, the connection's encoding).
Decode = Callable[[pq.abc.PGresult, str], T]


def _exchange(
    conn: StoreConnection | AsyncStoreConnection,
    call: PreparedCall,
    args: Sequence[Any],
    decode: Decode[T],
) -> _Exchange[T]:
    encoding = conn.info.encoding
    params = _params(call, args, encoding)
    pgconn = conn.pgconn
    retried = False
    while True:
        if call.name not in conn.prepared_calls:
            pgconn.send_prepare(call.name, call.text, param_types=call.types)
            failure = _failure((yield), encoding)
            # Taken: a warm-up that failed part way (``_reads``) left it
            # prepared (PREPARE outlives its transaction), from the same text.
            if failure is not None and failure.sqlstate != _TAKEN:
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
        if failure.sqlstate != _FORGOTTEN or retried:
            raise failure
        # Forgotten by the server: nothing ran; prepare again, send again.
        # DISCARD ALL (a pooler's reset, an administrator) also reset the
        # session's settings (lock_timeout, plan_cache_mode, read-only): they
        # are set again first, whichever reset it was.
        conn.prepared_calls.discard(call.name)
        retried = True
        if conn.session_settings is not None:
            pgconn.send_query(conn.session_settings)
            failure = _failure((yield), encoding)
            if failure is not None:
                raise failure


def run_prepared(
    conn: StoreConnection,
    call: PreparedCall,
    args: Sequence[Any],
    decode: Decode[T],
) -> T:
    """Run ``call`` with ``args`` as its prepared statement on ``conn``; decode its result."""
    exchange = _exchange(conn, call, args, decode)
    with conn.lock:
        try:
            next(exchange)
            while True:
                exchange.send(conn.wait(generators.execute(conn.pgconn)))
        except StopIteration as done:
            value: T = done.value
            return value


def _wake(ready: Uncancellable[int], state: int) -> None:
    if not ready.done():
        ready.set_result(state)


async def _wait_async(gen: PQGen[T], fileno: int) -> T:
    """Drive a psycopg generator on the running loop: one future per wait, no timer.

    ``AsyncConnection.wait`` also arms a 100 ms timer per wait (to look for
    interrupts) and, when interrupted, cancels the statement on the server.
    Neither applies here: a store call cannot be cancelled mid-call
    (``_uncancelled``), signals wait for the call's end
    (``_interrupts``), and the call's deadline (``_async_pool``) cuts the socket,
    which wakes this wait with the connection's failure. So a wait is a reader
    (or writer) callback and the future it resolves.
    """
    loop = asyncio.get_running_loop()
    try:
        state = next(gen)
        while True:
            # Uncancellable: the call's own waits pass straight to its task
            # (``_uncancelled``).
            ready: Uncancellable[int] = Uncancellable(loop=loop)
            if state & _WAIT_R:
                loop.add_reader(fileno, _wake, ready, _WAIT_R)
            if state & _WAIT_W:
                loop.add_writer(fileno, _wake, ready, _WAIT_W)
            try:
                flags = await ready
            finally:
                if state & _WAIT_R:
                    loop.remove_reader(fileno)
                if state & _WAIT_W:
                    loop.remove_writer(fileno)
            state = gen.send(flags)
    except StopIteration as done:
        value: T = done.value
        return value
    except OSError as exc:  # the socket is gone: as psycopg reports it
        raise psycopg.OperationalError("connection socket closed") from exc


async def run_prepared_async(
    conn: AsyncStoreConnection,
    call: PreparedCall,
    args: Sequence[Any],
    decode: Decode[T],
) -> T:
    """``run_prepared`` on an asyncio connection: the same messages, awaited."""
    exchange = _exchange(conn, call, args, decode)
    async with conn.lock:
        try:
            next(exchange)
            while True:
                pgconn = conn.pgconn
                results = await _wait_async(generators.execute(pgconn), pgconn.socket)
                exchange.send(results)
        except StopIteration as done:
            value: T = done.value
            return value


def call_prepared(
    conn: StoreConnection, call: PreparedCall, args: Sequence[Any]
) -> tuple[Any, ...] | None:
    """Run the operation ``call`` with ``args`` on ``conn``; return its row."""
    return run_prepared(conn, call, args, _row)


async def call_prepared_async(
    conn: AsyncStoreConnection, call: PreparedCall, args: Sequence[Any]
) -> tuple[Any, ...] | None:
    """``call_prepared`` on an asyncio connection."""
    return await run_prepared_async(conn, call, args, _row)
