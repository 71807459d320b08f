"""Group commit: one durable COMMIT carries the writes of many threads of one store.

A ``SqliteStore`` owns one connection, so its writers queue on the instance lock
(Q9) and, at ``synchronous=FULL``, each write pays one WAL flush of its own.
With group commit, the threads writing through one store at the same time share
a transaction instead:

1. A caller queues its operation (fence check + mutation closures).
2. If no other caller is leading, it becomes the leader; otherwise it waits
   until its operation is done or leadership is free.
3. The leader takes the instance lock, then takes EVERYTHING queued at that
   moment (its own operation included) as one batch. It never waits for
   company: a lone caller forms a batch of one at once. (When the previous
   batch was shared, the leader first yields the GIL once, ``time.sleep(0)``,
   so the callers just released can queue again; no timed wait.)
4. A batch of one runs exactly as without group commit (``run_solo``). A
   larger batch runs as ONE ``BEGIN IMMEDIATE`` transaction (``run_batch``) in
   which every operation has its own ``SAVEPOINT``: its failpoints
   (``after-begin``, ``after-fence-check``), its fence check, its mutation with
   its seq guard. An operation that raises is rolled back to its savepoint
   only and its caller gets the error; its batch-mates go on.
5. Operations queued while the batch ran join it before the commit ("late
   joiners", up to ``MAX_BATCH`` in all: nobody waits for them, they just ride
   along). Then ``before-commit`` is hit for each applied operation and the
   ONE COMMIT runs. It is all or nothing: if anything fails from here on (a failpoint, a
   busy or I/O error at COMMIT), the whole transaction is rolled back and every
   caller whose operation was applied gets an error; nothing of the batch is
   visible. A process killed anywhere before COMMIT returns leaves none of the
   batch behind (SQLite's own atomic commit).
6. Each caller returns only after the shared COMMIT has returned, that is, is
   durable at the store's ``synchronous`` level, and hits its own
   ``after-commit`` failpoint in its own thread.

Operations of one batch execute in queue order, each seeing the ones before it,
as if run one after another; each caller's operation runs between its call and
its return, so the history stays linearizable. Busy handling is unchanged: the
leader arms the busy deadline before BEGIN IMMEDIATE, and a busy BEGIN or
COMMIT fails every caller of the batch with ``StoreBusyError`` (nothing
written). A thread that already holds the instance lock (re-entrant use) runs
its operation alone, since queueing behind a leader that needs the same lock
would deadlock.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final, Generic, TypeVar, final

import apsw

from rulvar_store._failpoints import hit
from rulvar_store.errors import ContractError
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._errors import translate

__all__ = ["GroupCommitter", "Operation", "run_batch"]

T = TypeVar("T")

# Operations one transaction carries at most (late joiners included), so a
# steady stream of writers cannot keep a leader's own caller waiting forever.
MAX_BATCH: Final = 64
SAVEPOINT: Final = "SAVEPOINT rulvar_py_op"
RELEASE: Final = "RELEASE rulvar_py_op"
ROLLBACK_TO: Final = "ROLLBACK TO rulvar_py_op"


@final
class Operation(Generic[T]):
    """One caller's write: its closures, then its outcome once the batch is decided."""

    __slots__ = ("done", "error", "fence", "mutate", "name", "result")

    def __init__(
        self,
        name: str,
        fence: Callable[[], None] | None,
        mutate: Callable[[apsw.Cursor], T],
    ) -> None:
        self.name = name
        self.fence = fence
        self.mutate = mutate
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None

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


@final
class GroupCommitter:
    """Queue and leadership of one store's writers (see the module docstring).

    ``store_lock`` is the store's instance RLock (Q9); the leader holds it for
    the whole batch, so reads and other writes of the store never interleave
    with the transaction. ``run_solo`` runs a batch of one, ``run_batch`` a
    larger one; both must decide every operation (``succeed`` or ``fail``).
    """

    __slots__ = (
        "_cond",
        "_leading",
        "_queue",
        "_run_batch",
        "_run_solo",
        "_shared",
        "_shared",
        "_store_lock",
        "batches",
        "operations",
    )

    def __init__(
        self,
        store_lock: threading.RLock,
        run_solo: Callable[[Operation[Any]], None],
        run_batch: Callable[[list[Operation[Any]], Callable[[], bool]], None],
    ) -> None:
        self._store_lock = store_lock
        self._run_solo = run_solo
        self._run_batch = run_batch
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Operation[Any]] = []
        self._leading = False
        self._shared = False
        # Transactions run and operations carried, for benchmarks and tests.
        self.batches = 0
        self.operations = 0

    def submit(self, op: Operation[T]) -> T:
        """Run ``op`` in the next batch and return its result (or raise its error)."""
        if self._store_lock._is_owned():  # type: ignore[attr-defined]  # CPython RLock
            with self._store_lock:
                self._run_solo(op)
            return op.outcome()
        with self._cond:
            self._queue.append(op)
            while self._leading and not op.done:
                self._cond.wait()
            if op.done:
                return op.outcome()
            self._leading = True
        try:
            with self._store_lock:
                if self._shared:
                    time.sleep(0)
                with self._cond:
                    batch, self._queue = self._queue, []
                self._shared = len(batch) > 1
                self.batches += 1
                self.operations += len(batch)
                self._decide(batch)
        finally:
            with self._cond:
                self._leading = False
                self._cond.notify_all()
        return op.outcome()

    def _take_more(self, batch: list[Operation[Any]]) -> bool:
        """Move what was queued meanwhile into the running ``batch``."""
        with self._cond:
            if not self._queue:
                return False
            batch += self._queue
            self.operations += len(self._queue)
            self._queue = []
        return True

    def _decide(self, batch: list[Operation[Any]]) -> None:
        try:
            if len(batch) == 1:
                self._run_solo(batch[0])
            else:
                self._run_batch(batch, lambda: self._take_more(batch))
        except BaseException as exc:
            # Never leave a waiter hanging: whatever escaped fails the rest.
            for op in batch:
                if not op.done:
                    op.fail(_copy_for_caller(exc))
            raise
        finally:
            for op in batch:
                if not op.done:  # pragma: no cover - a runner bug
                    op.fail(
                        ContractError(f"sqlite {op.name}: the batch left it undecided")
                    )


def run_batch(
    conn: apsw.Connection,
    cursor: apsw.Cursor,
    batch: list[Operation[Any]],
    more: Callable[[], bool],
) -> None:
    """Run ``batch`` as ONE transaction with a savepoint per operation.

    The caller holds the store lock, has checked the store is open and armed
    the busy deadline. Before committing, ``more()`` moves operations queued
    meanwhile into ``batch`` (late joiners ride the same COMMIT; nobody waits
    for them), up to ``MAX_BATCH``. Decides every operation of ``batch``.
    """
    try:
        cursor.execute(sql.BEGIN)
    except apsw.Error as exc:
        _fail_all(batch, conn, cursor, exc)
        return
    applied: list[tuple[Operation[Any], Any]] = []
    index = 0
    while index < len(batch) or (len(batch) < MAX_BATCH and more()):
        op = batch[index]
        index += 1
        try:
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
            cursor.execute(RELEASE)
        except Exception as exc:
            if not _undo_savepoint(conn, cursor):
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
