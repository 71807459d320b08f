"""The one write transaction of a ``SqliteStore``: a batch of operations, one COMMIT.

Every write of the store, alone or grouped, runs here, called only by the
door (``_group_commit.GroupCommitter``): BEGIN IMMEDIATE, per operation its
failpoints, fence check and mutation in its caller's context (undone alone if
it fails), then one COMMIT, or one ROLLBACK. A batch of one issues exactly the
statements of a transaction of its own: BEGIN IMMEDIATE, the fence check, the
mutation, COMMIT.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final, Generic, TypeVar, final

import apsw

from rulvar_store.backend import hit
from rulvar_store.errors import RulvarError
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._errors import translate

__all__ = [
    "MAX_BATCH",
    "SAVEPOINT",
    "Operation",
    "fail_undecided",
    "one_statement",
    "roll_back_applied",
    "run_batch",
]

T = TypeVar("T")

# Operations one transaction carries at most (late joiners included), so a
# steady stream of writers cannot keep a leader's own caller waiting forever.
MAX_BATCH: Final = 64
SAVEPOINT: Final = "SAVEPOINT rulvar_py_op"
RELEASE: Final = "RELEASE rulvar_py_op"
ROLLBACK_TO: Final = "ROLLBACK TO rulvar_py_op"
# A queued caller checks for asynchronous exceptions this often (a wake-up
# itself returns at once).
_WAIT_SLICE_S: Final = 0.05


@final
class Operation(Generic[T]):
    """One caller's write: its closures, then its outcome once the batch is decided.

    ``atomic`` says the mutation is a single statement, which SQLite undoes by
    itself when it fails, so it needs no savepoint of its own.
    """

    __slots__ = (
        "_wake",
        "applied",
        "atomic",
        "context",
        "done",
        "error",
        "fence",
        "loop_woken",
        "mutate",
        "name",
        "result",
        "resume",
        "signalled",
    )

    def __init__(
        self,
        name: str,
        fence: Callable[[], None] | None,
        mutate: Callable[[apsw.Cursor], T],
        atomic: bool = False,
    ) -> None:
        self.name = name
        self.fence = fence
        self.mutate = mutate
        self.atomic = atomic
        self.done = False
        # Applied in the running transaction, its result kept, not yet decided.
        self.applied = False
        self.result: T | None = None
        self.error: BaseException | None = None
        # Held until the caller may go on (decided, or made leader); a plain
        # lock per waiter wakes exactly one thread, with no shared lock to
        # queue on again when it wakes.
        self._wake = threading.Lock()
        self._wake.acquire()
        # The caller's context (its failpoint aim, contextvars), for its steps.
        self.context = contextvars.copy_context()
        # An asyncio caller's loop and future instead (GroupCommitter.enqueue),
        # and whether its batch is over (set on that loop, when it is resumed).
        self.resume: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = (
            None
        )
        self.loop_woken = False
        # Its caller was told to go on (thread woken, or loop hop sent): a
        # second wake of the same operation does nothing.
        self.signalled = False

    def succeed(self, result: T) -> None:
        self.result = result
        self.done = True

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done = True

    def outcome(self) -> T:
        """Return the result, or raise the error, in the caller's thread."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set by succeed()

    def wait(self) -> None:
        """Sleep until ``wake``: the operation is decided, or its caller leads.

        A timed wait, so an asynchronous exception aimed at this thread
        (``PyThreadState_SetAsyncExc``) is delivered while it is queued.
        """
        while not self._wake.acquire(timeout=_WAIT_SLICE_S):
            pass

    def wait_until(self, deadline: float) -> bool:
        """``wait`` until the ``time.monotonic()`` ``deadline``; False: not woken by then."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._wake.acquire(timeout=min(left, _WAIT_SLICE_S)):
                return True

    def wake(self) -> None:
        """Let the waiting thread go on; a second wake is a no-op.

        Marked only once released: an interrupt of the waking thread in
        between leads to a second release at worst (refused below, or undone
        by nobody waiting again), never to a caller marked woken and asleep.
        """
        if self.signalled:
            return
        with suppress(RuntimeError):  # already released by an interrupted wake
            self._wake.release()
        self.signalled = True


def one_statement(
    statement: str, params: tuple[object, ...]
) -> Callable[[apsw.Cursor], None]:
    """A mutation of one statement (an ``atomic`` operation's usual shape)."""

    def mutate(cursor: apsw.Cursor) -> None:
        cursor.execute(statement, params)

    return mutate


def run_batch(
    conn: apsw.Connection,
    cursor: apsw.Cursor,
    batch: list[Operation[Any]],
    more: Callable[[], bool],
    begin: str = sql.BEGIN,
    verify: Callable[[], None] | None = None,
) -> None:
    """Run ``batch`` as ONE transaction, each operation with its own outcome.

    The caller holds the store lock, has checked the store is open and armed
    the busy deadline. Before committing, ``more()`` moves operations queued
    meanwhile into ``batch`` (late joiners ride the same COMMIT; nobody waits
    for them), up to ``MAX_BATCH``. Decides every operation of ``batch``.
    ``begin`` is BEGIN IMMEDIATE; only a seeded defect passes another.
    ``verify`` runs right after BEGIN, with the write lock held; an error it
    raises fails the whole batch, nothing written (the database file's
    identity, ``_file_identity``).

    BEGIN IMMEDIATE takes the write lock at once (waiting in the busy handler
    up to the deadline), never a read lock upgraded later, which SQLite would
    fail without calling the busy handler.
    """
    # An interrupt (a BaseException that is not an Exception) rolls back and
    # passes through, its batch-mates undecided, unless COMMIT had returned:
    # the door settles the batch (GroupCommitter._settle_interrupted).
    applied: list[Operation[Any]] = []
    index = 0
    while index < len(batch) or (len(batch) < MAX_BATCH and more()):
        op = batch[index]
        index += 1
        # Nothing applied yet: the operation's failure is the transaction's.
        savepoint = bool(applied) and not op.atomic
        changes = conn.total_changes()
        try:
            if not conn.in_transaction:
                cursor.execute(begin)
                if verify is not None:
                    verify()
            if savepoint:
                cursor.execute(SAVEPOINT)
        except (apsw.Error, RulvarError) as exc:
            _fail_all(batch, conn, cursor, exc)
            return
        try:
            # In the caller's context, wherever this runs: a failpoint hook
            # aimed at the caller (caller_identity) finds its hits.
            result = op.context.run(_apply, op, cursor)
            if savepoint:
                cursor.execute(RELEASE)
        except Exception as exc:
            if not _undo_failed(conn, cursor, savepoint, bool(applied), changes):
                # The error ended the whole transaction (SQLite rolls back on
                # some I/O and busy errors): nothing of the batch survives.
                _fail_all(batch, conn, cursor, exc)
                return
            op.fail(_spi_error(exc, op.name))
            continue
        except BaseException:
            roll_back_applied(conn, cursor, applied)
            raise
        op.result = result
        op.applied = True
        applied.append(op)
    if not applied:
        _rollback(conn, cursor)
        return
    try:
        for op in applied:
            op.context.run(hit, op.name, "before-commit")
        cursor.execute(sql.COMMIT)
    except Exception as exc:
        _fail_all(applied, conn, cursor, exc)
        return
    except BaseException:
        if conn.in_transaction:  # COMMIT never ran: nothing is durable
            roll_back_applied(conn, cursor, applied)
        raise  # else COMMIT returned: the door marks the applied ones succeeded
    for op in applied:
        op.succeed(op.result)


def _apply(op: Operation[T], cursor: apsw.Cursor) -> T:
    """The operation's own steps inside the transaction, failpoints included."""
    hit(op.name, "after-begin")
    if op.fence is not None:
        op.fence()
    hit(op.name, "after-fence-check")
    return op.mutate(cursor)


def roll_back_applied(
    conn: apsw.Connection, cursor: apsw.Cursor, applied: list[Operation[Any]]
) -> None:
    """Roll back; the applied operations are undecided again (nothing is durable)."""
    _rollback(conn, cursor)
    for op in applied:
        op.applied = False


def _undo_failed(
    conn: apsw.Connection,
    cursor: apsw.Cursor,
    savepoint: bool,
    others_applied: bool,
    changes_before: int,
) -> bool:
    """Undo a failed operation alone; False if the whole transaction is gone.

    Without a savepoint, SQLite has undone the failed statement by itself
    (``total_changes`` counts no row of a failed statement). If rows changed
    anyway, the operation raised after a statement that succeeded: it cannot
    be undone alone, so the whole batch fails rather than commit part of it.
    """
    if not others_applied:
        _rollback(conn, cursor)  # nothing to keep: as a transaction of its own
        return True
    if savepoint:
        return _undo_savepoint(conn, cursor)
    return conn.in_transaction and conn.total_changes() == changes_before


def _undo_savepoint(conn: apsw.Connection, cursor: apsw.Cursor) -> bool:
    """Roll back to the operation's savepoint; False if the transaction is gone."""
    if not conn.in_transaction:
        return False
    try:
        cursor.execute(ROLLBACK_TO)
        cursor.execute(RELEASE)
    except apsw.Error:
        _rollback(conn, cursor)
        return False
    return True


def _fail_all(
    ops: Sequence[Operation[Any]],
    conn: apsw.Connection,
    cursor: apsw.Cursor,
    exc: BaseException,
) -> None:
    """Roll the transaction back and fail every undecided operation with ``exc``."""
    _rollback(conn, cursor)
    for op in ops:
        if not op.done:
            op.fail(_copy_for_caller(_spi_error(exc, op.name)))


def _rollback(conn: apsw.Connection, cursor: apsw.Cursor) -> None:
    # The one rollback. SQLite may already have rolled back (BUSY, FULL, IOERR):
    # only an open transaction is rolled back, and a failing ROLLBACK never
    # hides the error that caused it.
    with suppress(apsw.Error):
        if conn.in_transaction:
            cursor.execute(sql.ROLLBACK)


def _spi_error(exc: BaseException, operation: str) -> BaseException:
    """The SPI error a caller sees for ``exc`` (driver errors translated, chained)."""
    if isinstance(exc, apsw.Error):
        error = translate(exc, operation)
        error.__cause__ = exc
        return error
    return exc


def fail_undecided(batch: Sequence[Operation[Any]], exc: BaseException) -> None:
    """Fail every undecided operation of ``batch`` with a copy of ``exc``.

    Whatever escaped a batch must never leave a waiter hanging.
    """
    for op in batch:
        if not op.done:
            op.fail(_copy_for_caller(exc))


def _copy_for_caller(exc: BaseException) -> BaseException:
    """A separate exception object per caller thread, chained to the shared one.

    Raising one object in several threads would interleave their tracebacks.
    """
    try:
        clone = copy.copy(exc)
    except Exception:  # pragma: no cover - an exception type that cannot be copied
        return exc
    clone.__cause__ = exc.__cause__ if exc.__cause__ is not None else exc
    clone.__traceback__ = None
    return clone
