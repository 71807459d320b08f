"""The pooled connections of both stores: each keeps ONE cursor for its mutations.

``conn.execute`` builds a new cursor per statement, and with it a new
``Transformer`` whose dumper lookups start cold: measured on one connection,
about 25 us of client CPU per call (a fenced append costs some 150 us of it in
all). A pooled connection is used by one call at a time (the pool hands it to
one caller), so the cursor it keeps is too; the cursor lives and dies with its
connection (a cut or stale connection is discarded whole). Only the one-row
results of the operation functions pass through it, so what it holds between
calls is a few bytes; the reads that are not prepared keep their own
short-lived cursors.

Each connection also records which operation calls and reads it has prepared
on the server (``_calls``, ``_reads``): prepared statements belong to the
session, so a new connection starts with none. And it keeps the poll object
its checkouts ask whether the server hung up (``_pool.closed_by_server``).
"""

from __future__ import annotations

import select
from typing import Any, Final

import psycopg
from psycopg.rows import TupleRow

__all__ = ["AsyncStoreConnection", "StoreConnection", "cancelled_sync_wait"]

# PostgreSQL's words when a COMMIT's wait for a synchronous standby is cut
# short (syncrep.c): "canceling wait for synchronous replication due to user
# request" (a cancel: the session lives on and the COMMIT returns SUCCESS) and
# "canceling the wait for synchronous replication and terminating connection".
_SYNC_WAIT: Final = ("wait for synchronous replication",)


def cancelled_sync_wait(diag: psycopg.errors.Diagnostic) -> bool:
    """Whether a notice says a commit's synchronous-replication wait was cancelled.

    Matched on the English text, and on the SQLSTATEs these warnings carry
    (01000 for a cancel, 57P01 for a termination) when the server speaks
    another language (``lc_messages``): no other WARNING reaches a store call.
    """
    if (diag.severity_nonlocalized or diag.severity) != "WARNING":
        return False
    text = diag.message_primary or ""
    return any(words in text for words in _SYNC_WAIT) or diag.sqlstate in (
        "01000",
        "57P01",
    )


class _Notes:
    """The state a pooled connection keeps beside its session (both drivers)."""

    timeline = 0  # its server's timeline when last asked (``_primary``)
    probed_at = 0.0  # monotonic time of that answer
    started = ""  # its session's backend_start (``_sessions``)
    pid = 0  # its backend's pid, read while connected (libpq forgets it once cut)
    sync_wait_cancelled = False  # a notice said so since the last reset

    def note(self, diag: psycopg.errors.Diagnostic) -> None:
        if cancelled_sync_wait(diag):
            self.sync_wait_cancelled = True


class StoreConnection(_Notes, psycopg.Connection[TupleRow]):
    """A sync pooled connection with the cursor its mutations reuse."""

    _call_cursor: psycopg.Cursor[TupleRow] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prepared_calls: set[bytes] = set()  # names prepared in this session
        # The SETs the pool gave this session, sent again when the server shows
        # it reset the session (``_calls``: a forgotten statement).
        self.session_settings: bytes | None = None
        self.idle_poller: select.poll | None = None  # see ``_pool.closed_by_server``
        self.add_notice_handler(self.note)

    def call_cursor(self) -> psycopg.Cursor[TupleRow]:
        """The connection's mutation cursor, made on first use."""
        cursor = self._call_cursor
        if cursor is None or cursor.closed:
            cursor = self._call_cursor = self.cursor()
        return cursor


class AsyncStoreConnection(_Notes, psycopg.AsyncConnection[TupleRow]):
    """An asyncio pooled connection with the cursor its mutations reuse."""

    _call_cursor: psycopg.AsyncCursor[TupleRow] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prepared_calls: set[bytes] = set()  # names prepared in this session
        # The SETs the pool gave this session, sent again when the server shows
        # it reset the session (``_calls``: a forgotten statement).
        self.session_settings: bytes | None = None
        self.idle_poller: select.poll | None = None  # see ``_pool.closed_by_server``
        self.add_notice_handler(self.note)

    def call_cursor(self) -> psycopg.AsyncCursor[TupleRow]:
        """The connection's mutation cursor, made on first use."""
        cursor = self._call_cursor
        if cursor is None or cursor.closed:
            cursor = self._call_cursor = self.cursor()
        return cursor
