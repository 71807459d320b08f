"""Group commit: one durable COMMIT carries the writes of many threads of one store.

A ``SqliteStore`` owns one connection, so its writers queue on the instance lock
(Q9) and, at ``synchronous=FULL``, each write pays one WAL flush of its own.
With group commit, the threads writing through one store at the same time share
a transaction instead:

1. A caller queues its operation (fence check + mutation closures). If no
   other caller is leading, it becomes the leader; otherwise it sleeps on its
   operation's own lock until the operation is decided or leadership is
   handed to it.
2. The leader takes the instance lock, then EVERYTHING queued at that moment
   (its own operation included) as one batch, and runs it as ONE ``BEGIN
   IMMEDIATE`` transaction (``run_batch``). It never waits for company: a lone
   caller's batch of one runs at once, with exactly the statements of a
   transaction of its own.
3. Each operation has its failpoints (``after-begin``, ``after-fence-check``),
   its fence check and its mutation with its seq guard. One that raises is
   undone alone and its caller gets the error; its batch-mates go on. A
   multi-statement mutation (``acquire``, ``delete``) runs inside its own
   ``SAVEPOINT`` once an earlier operation of the batch is applied; a
   single-statement one (``append``, ``put_meta``, ``renew``, ``release``, blob
   writes) needs none, since SQLite undoes a failed statement by itself (one
   that changed rows and raised anyway cannot be undone alone: its whole
   batch fails instead). A failure while nothing is applied yet rolls the
   whole transaction back, as a transaction of its own would.
4. Operations queued while the batch ran join it before the commit ("late
   joiners", up to ``MAX_BATCH`` in all: nobody waits for them, they just ride
   along). Then ``before-commit`` is hit for each applied operation and the
   ONE COMMIT runs. It is all or nothing: if anything fails from here on (a
   failpoint, a busy or I/O error at COMMIT), the whole transaction is rolled
   back and every caller whose operation was applied gets an error; nothing of
   the batch is visible. A process killed anywhere before COMMIT returns leaves
   none of the batch behind (SQLite's own atomic commit).
5. Each caller returns only after the shared COMMIT has returned, that is, is
   durable at the store's ``synchronous`` level, and hits its own
   ``after-commit`` failpoint in its own thread. A leader that finds callers
   queued behind its batch hands leadership to the first of them.

Operations of one batch execute in queue order, each seeing the ones before it,
as if run one after another; each caller's operation runs between its call and
its return, so the history stays linearizable. Busy handling is unchanged: the
leader arms the busy deadline before BEGIN IMMEDIATE, and a busy BEGIN or
COMMIT fails every caller of the batch with ``StoreBusyError`` (nothing
written). A thread that already holds the instance lock (re-entrant use) runs
its operation alone, since queueing behind a leader that needs the same lock
would deadlock.

What it buys is bounded twice over (``bench/bench_group_commit.py`` measures
both): a commit's flush grows with the pages it writes (appends to N runs
touch about 2N index pages), so even raw apsw batching N appends per
transaction gains less than N; and every caller of a batch must be woken,
one GIL hand-off after another, once the commit has returned.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final, Generic, TypeVar, final

import apsw

from rulvar_store.backend import hit
from rulvar_store.errors import ContractError
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._errors import translate
from rulvar_store_sqlite._owned_lock import OwnedRLock

__all__ = ["GroupCommitter", "Operation", "run_batch"]

T = TypeVar("T")

# Operations one transaction carries at most (late joiners included), so a
# steady stream of writers cannot keep a leader's own caller waiting forever.
MAX_BATCH: Final = 64
SAVEPOINT: Final = "SAVEPOINT rulvar_py_op"
RELEASE: Final = "RELEASE rulvar_py_op"
ROLLBACK_TO: Final = "ROLLBACK TO rulvar_py_op"


def _no_more() -> bool:
    return False


@final
class Operation(Generic[T]):
    """One caller's write: its closures, then its outcome once the batch is decided.

    ``atomic`` says the mutation is a single statement, which SQLite undoes by
    itself when it fails, so it needs no savepoint of its own.
    """

    __slots__ = (
        "_wake",
        "atomic",
        "done",
        "error",
        "fence",
        "mutate",
        "name",
        "result",
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
        self.result: T | None = None
        self.error: BaseException | None = None
        # Held until the caller may go on (decided, or made leader); a plain
        # lock per waiter wakes exactly one thread, with no shared lock to
        # queue on again when it wakes.
        self._wake = threading.Lock()
        self._wake.acquire()

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
        """Sleep until ``wake``: the operation is decided, or its caller leads."""
        self._wake.acquire()

    def wake(self) -> None:
        self._wake.release()


@final
class GroupCommitter:
    """Queue and leadership of one store's writers (see the module docstring).

    ``store_lock`` is the store's instance lock (an ``OwnedRLock``) (Q9); the leader holds it for
    the whole batch, so reads and other writes of the store never interleave
    with the transaction. ``run_batch(batch, more)`` runs the batch as one
    transaction and must decide every operation (``succeed`` or ``fail``);
    ``more()`` moves operations queued meanwhile into it.
    """

    __slots__ = (
        "_leading",
        "_mutex",
        "_queue",
        "_run_batch",
        "_store_lock",
        "batches",
        "operations",
    )

    def __init__(
        self,
        store_lock: OwnedRLock,
        run_batch: Callable[[list[Operation[Any]], Callable[[], bool]], None],
    ) -> None:
        self._store_lock = store_lock
        self._run_batch = run_batch
        self._mutex = threading.Lock()
        self._queue: list[Operation[Any]] = []
        self._leading = False
        # Transactions run and operations carried, for benchmarks and tests.
        self.batches = 0
        self.operations = 0

    def queued(self) -> int:
        """Operations waiting for the next batch (tests park a leader and count)."""
        with self._mutex:
            return len(self._queue)

    def submit(self, op: Operation[T]) -> T:
        """Run ``op`` in the next batch and return its result (or raise its error)."""
        if self._store_lock.held_here():
            with self._store_lock:
                self._decide([op], _no_more)
            return op.outcome()
        with self._mutex:
            self._queue.append(op)
            lead = not self._leading
            self._leading = True
        if not lead:
            op.wait()
            if op.done:
                return op.outcome()
        self._lead(op)
        return op.outcome()

    def _lead(self, own: Operation[Any]) -> None:
        """Run everything queued as one batch, then wake its callers."""
        batch: list[Operation[Any]] = []
        try:
            with self._store_lock:
                with self._mutex:
                    batch, self._queue = self._queue, []
                self.batches += 1
                self.operations += len(batch)
                self._decide(batch, lambda: self._take_more(batch))
        finally:
            with self._mutex:
                successor = self._queue[0] if self._queue else None
                if successor is None:
                    self._leading = False
            if successor is not None:
                successor.wake()  # not decided: it leads the next batch
            for op in batch:
                if op is not own:
                    op.wake()

    def _take_more(self, batch: list[Operation[Any]]) -> bool:
        """Move what was queued meanwhile into the running ``batch``."""
        with self._mutex:
            if not self._queue:
                return False
            batch += self._queue
            self.operations += len(self._queue)
            self._queue = []
        return True

    def _decide(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        try:
            self._run_batch(batch, more)
        except BaseException as exc:
            # Never leave a waiter hanging: whatever escaped fails the rest.
            for op in batch:
                if not op.done:
                    op.fail(_copy_for_caller(exc))
            raise
        for op in batch:
            if not op.done:  # pragma: no cover - a runner bug
                op.fail(ContractError(f"sqlite {op.name}: the batch left it undecided"))


def run_batch(
    conn: apsw.Connection,
    cursor: apsw.Cursor,
    batch: list[Operation[Any]],
    more: Callable[[], bool],
) -> None:
    """Run ``batch`` as ONE transaction, each operation with its own outcome.

    The caller holds the store lock, has checked the store is open and armed
    the busy deadline. Before committing, ``more()`` moves operations queued
    meanwhile into ``batch`` (late joiners ride the same COMMIT; nobody waits
    for them), up to ``MAX_BATCH``. Decides every operation of ``batch``.
    """
    applied: list[tuple[Operation[Any], Any]] = []
    index = 0
    while index < len(batch) or (len(batch) < MAX_BATCH and more()):
        op = batch[index]
        index += 1
        # Nothing applied yet: the operation's failure is the transaction's.
        savepoint = bool(applied) and not op.atomic
        changes = conn.total_changes()
        try:
            if not conn.in_transaction:
                cursor.execute(sql.BEGIN)
            if savepoint:
                cursor.execute(SAVEPOINT)
        except apsw.Error as exc:
            _fail_all(batch, conn, cursor, exc)
            return
        try:
            hit(op.name, "after-begin")
            if op.fence is not None:
                op.fence()
            hit(op.name, "after-fence-check")
            result = op.mutate(cursor)
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
            _rollback(conn, cursor)
            raise
        applied.append((op, result))
    if not applied:
        _rollback(conn, cursor)
        return
    try:
        for op, _ in applied:
            hit(op.name, "before-commit")
        cursor.execute(sql.COMMIT)
    except Exception as exc:
        _fail_all([op for op, _ in applied], conn, cursor, exc)
        return
    except BaseException:
        _rollback(conn, cursor)
        raise
    for op, result in applied:
        op.succeed(result)


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
    # As in SqliteStore._rollback: SQLite may already have rolled back, and a
    # failing ROLLBACK never hides the error that caused it.
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
