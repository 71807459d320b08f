"""The hot reads as prepared statements, ready on a pooled connection before its first call.

A fresh process's first read of a thread (the LangGraph saver's ``last_ref``
then ``get_under``) on a new server session paid for more than its two round
trips: each statement was parsed and planned there, and the session first
loaded the blobs table's and its indexes' catalog entries to do so (measured:
a new connection's first two reads 0.9 ms, the same reads later 0.45 ms).
So the reads a store's common paths send (``blob get``, ``get_meta``,
``last_ref``'s and ``get_under``'s range reads, ``list_refs``) take the
prepared path of the operation calls (``_calls``): named per connection, the
parameters declared ``text``, only Bind/Execute sent, the columns read back
in binary (a blob as its bytes, no hex).

And a connection gets them ready before its first call (``warm_reads``): ONE
simple-protocol message PREPAREs each hot read and EXECUTEs it once with
values that match no row, which plans it and loads the catalog entries it
touches. It runs where a connection is first used by a booted store: on the
boot's connection right after the boot (the next call gets that connection
back: the pool is LIFO), and in the pool's ``configure`` for the connections
made later. A warm-up that fails (a schema dropped meanwhile) leaves the
connection as it was; its reads are then prepared when first sent, as the
operation calls are. With ``prepared_statements=false`` none of this runs and
the reads keep the cursor path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import psycopg
from psycopg import pq

from rulvar_store_postgres._calls import PreparedCall, run_prepared, run_prepared_async
from rulvar_store_postgres._conn import AsyncStoreConnection, StoreConnection
from rulvar_store_postgres._get_under import get_under_statements
from rulvar_store_postgres._last_ref import last_ref_statements
from rulvar_store_postgres._schema import Sql

__all__ = [
    "PreparedRead",
    "awarm_reads",
    "prepared_reads",
    "read_prepared",
    "read_prepared_async",
    "warm_reads",
]

Column = Literal["text", "bytea"]
_TEXT_OID: Final = 25
_BINARY: Final = 1


@dataclass(frozen=True, slots=True)
class PreparedRead:
    """One read statement as a named server-side statement, and its columns."""

    call: PreparedCall
    columns: tuple[Column, ...]
    # Readied on a new connection: always (None) or where the ref key orders
    # like bytes (True) or not (False): only the variant ``_last_ref`` picks.
    warm: bool | None
    sql: str  # PREPARE's form: the statement with its parameters declared


def _numbered(statement: str) -> tuple[str, int]:
    """``statement`` with its ``%s`` placeholders as ``$1..$n``, and n."""
    pieces = statement.split("%s")
    if "%" in "".join(pieces):
        raise ValueError(f"not a plain %s statement: {statement!r}")
    text = pieces[0]
    for n, piece in enumerate(pieces[1:], 1):
        text += f"${n}{piece}"
    return text, len(pieces) - 1


def _read(
    name: str, statement: str, columns: tuple[Column, ...], warm: bool | None
) -> tuple[str, PreparedRead]:
    text, count = _numbered(statement)
    call = PreparedCall(
        name=name.encode(),
        text=text.encode(),
        types=(_TEXT_OID,) * count,
        formats=(0,) * count,
        result_format=_BINARY,
    )
    types = ", ".join(["text"] * count)
    sql = f"PREPARE {name} ({types}) AS {text}"
    return statement, PreparedRead(call, columns, warm, sql)


def prepared_reads(sql: Sql) -> dict[str, PreparedRead]:
    """The prepared form of each hot read of ``sql``'s schema, keyed by its statement text."""
    _, scan, fallback = last_ref_statements(sql.quoted)
    under, under_fallback = get_under_statements(sql.quoted)
    # Names under the prefix Appendix P reserves; one store per pool.
    return dict(
        (
            _read("rulvar_rd_blob_get", sql.blob_get, ("bytea",), None),
            _read("rulvar_rd_get_meta", sql.get_meta, ("text",), None),
            _read("rulvar_rd_last_ref", scan, ("text",), True),
            _read("rulvar_rd_last_ref_run", fallback, ("text",), False),
            _read("rulvar_rd_get_under", under, ("text", "bytea"), True),
            _read("rulvar_rd_get_under_run", under_fallback, ("text", "bytea"), False),
            # Read in the savers' fallbacks; prepared when first sent.
            _read("rulvar_rd_blob_list", sql.blob_list, ("text",), None),
        )
    )


def _cell(value: bytes | None, column: Column, encoding: str) -> Any:
    if value is None or column == "bytea":
        return value
    return value.decode(encoding)


def _decoder(read: PreparedRead, kind: str) -> Any:
    """How the read's binary result becomes the rows ``_plans`` expects of ``kind``."""
    columns = read.columns

    def rows(result: pq.abc.PGresult, encoding: str) -> list[Any]:
        get = result.get_value
        if kind == "values":  # the first column's bare values
            first = columns[0]
            return [_cell(get(i, 0), first, encoding) for i in range(result.ntuples)]
        return [
            tuple(_cell(get(i, j), c, encoding) for j, c in enumerate(columns))
            for i in range(result.ntuples)
        ]

    return rows


def read_prepared(
    conn: StoreConnection, read: PreparedRead, args: Iterable[Any], kind: str
) -> list[Any]:
    """Run ``read`` with ``args`` on ``conn``: its rows as a cursor of ``kind`` returns them."""
    decoded: list[Any] = run_prepared(conn, read.call, list(args), _decoder(read, kind))
    return decoded


async def read_prepared_async(
    conn: AsyncStoreConnection, read: PreparedRead, args: Iterable[Any], kind: str
) -> list[Any]:
    """``read_prepared`` on an asyncio connection."""
    decoded: list[Any] = await run_prepared_async(
        conn, read.call, list(args), _decoder(read, kind)
    )
    return decoded


def _warm_up(
    conn: StoreConnection | AsyncStoreConnection,
    reads: dict[str, PreparedRead],
    bytewise: bool | None,
) -> tuple[str, list[bytes]]:
    """The warm-up message for the hot reads ``conn`` lacks, and their names."""
    statements: list[str] = []
    names: list[bytes] = []
    for read in reads.values():
        if read.call.name in conn.prepared_calls:
            continue
        if read.warm is None or (bytewise is not None and read.warm == bytewise):
            values = ", ".join(["''"] * len(read.call.types))  # matches no row
            name = read.call.name.decode()
            statements += (read.sql, f"EXECUTE {name} ({values})")
            names.append(read.call.name)
    return ";".join(statements), names


def warm_reads(
    conn: StoreConnection, reads: dict[str, PreparedRead], bytewise: bool | None
) -> None:
    """Prepare and run once, in one round trip, the hot reads ``conn`` lacks."""
    message, names = _warm_up(conn, reads, bytewise)
    if not message:
        return
    try:
        conn.execute(message)  # no parameters: the simple protocol
    except psycopg.Error:
        if conn.broken:
            raise
        return  # prepared when first sent (``_calls`` takes a name already taken)
    conn.prepared_calls.update(names)


async def awarm_reads(
    conn: AsyncStoreConnection,
    reads: dict[str, PreparedRead],
    bytewise: bool | None,
) -> None:
    """``warm_reads`` for an asyncio connection."""
    message, names = _warm_up(conn, reads, bytewise)
    if not message:
        return
    try:
        await conn.execute(message)
    except psycopg.Error:
        if conn.broken:
            raise
        return
    conn.prepared_calls.update(names)
