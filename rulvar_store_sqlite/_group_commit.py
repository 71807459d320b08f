"""The store's one transaction door: group commit of every write of one store.

``GroupCommitter`` owns the store's connection, cursor and busy deadline; every
write (the journal's and the blob twin's) and every read goes through it. With
``group_commit=False`` each write runs as a batch of one under the instance
lock; otherwise the steps below apply. The transaction itself is
``_transaction.run_batch``.

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
   IMMEDIATE`` transaction (``_transaction.run_batch``). It never waits for company: a lone
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
   ``after-commit`` failpoint in its own thread. The leader wakes them as
   soon as the batch is decided, before its own steps (releasing the lock,
   the hand-over); each caller is woken once, however often a wake is sent.
   A leader that finds callers queued behind its batch hands leadership to
   the first of them.

A write nobody waits for at once (a LangGraph task's writes, which the graph
saves in the background while it computes the step's checkpoint) may be
QUEUED instead (``queue``): it leads only after lingering up to ``linger_s``
for company. The first ``submit`` (or asyncio ``enqueue``) to arrive meanwhile
takes the lead over at once and carries it in its batch, so the two share one
COMMIT and one WAL flush; with nobody arriving it commits alone at the
deadline. ``Queued.wait`` returns only once the write is decided, exactly as
``submit`` would, so it is acknowledged only when durable.

Operations of one batch execute in queue order, each seeing the ones before it,
as if run one after another; each caller's operation runs between its call and
its return, so the history stays linearizable. Busy handling is unchanged: the
leader arms the busy deadline before BEGIN IMMEDIATE, and a busy BEGIN or
COMMIT fails every caller of the batch with ``StoreBusyError`` (nothing
written). A thread that already holds the instance lock (re-entrant use) runs
its operation alone, since queueing behind a leader that needs the same lock
would deadlock. Each operation's steps (failpoints, fence, mutation) run in
its caller's ``contextvars`` context, whichever thread leads.

Interrupts (``KeyboardInterrupt``, ``SystemExit``, asynchronous exceptions)
stay with the interrupted caller (Q14). One interrupted while queued takes its
operation out of the queue (it never runs) and passes on leadership it was
handed. A leader interrupted inside its batch rolls the transaction back; its
batch-mates' operations go back, undecided, to the front of the queue for the
next leader, unless COMMIT had already returned, in which case they succeeded.

asyncio callers (``AsyncSqliteStore``) queue the same operations with
``enqueue``; the door's one worker thread (``HopThreads``) leads their
batches, and each batch's coroutines are resumed with one
``call_soon_threadsafe`` per event loop, after the COMMIT. Sync threads and
coroutines may share one batch.

What it buys is bounded twice over (``bench/bench_group_commit.py`` measures
both): a commit's flush grows with the pages it writes (appends to N runs
touch about 2N index pages), so even raw apsw batching N appends per
transaction gains less than N; and every caller of a batch must be woken,
one GIL hand-off after another, once the commit has returned.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any, ClassVar, Generic, TypeVar, final

import apsw

from rulvar_store.backend import ForkGuard, HopThreads, hit
from rulvar_store.errors import ContractError, StoreClosedError
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._connection import BusyDeadline
from rulvar_store_sqlite._errors import translate_errors
from rulvar_store_sqlite._file_identity import FileIdentity
from rulvar_store_sqlite._options import MEMORY_PATH
from rulvar_store_sqlite._transaction import (
    Operation,
    fail_undecided,
    roll_back_applied,
    run_batch,
)

__all__ = ["GroupCommitter", "OwnedRLock", "Queued"]

T = TypeVar("T")

Fence = Callable[[], None] | None
Mutation = Callable[[apsw.Cursor], T]


# The store's instance lock lives beside its only reader (``held_here`` in
# ``submit``): every write takes it, so it stays in the door's module rather
# than costing each append three calls into another file.
@final
class OwnedRLock:
    """``threading.RLock`` plus ``held_here()``; used as a context manager.

    The door must tell a call made while the lock is already held (a nested
    write, run inline) from a fresh one (queued for the next batch);
    ``threading.RLock`` answers only through ``_is_owned``, a private CPython
    method, so the owner and depth are tracked here instead.
    """

    __slots__ = ("_depth", "_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Written only by the thread holding ``_lock``; a reader on another thread
        # can see a stale value, but never its own ident, so held_here() is exact.
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        """Take the lock (re-entrant for its holder)."""
        self._lock.acquire()
        self._owner = threading.get_ident()
        self._depth += 1

    def release(self) -> None:
        """Give back one level; the last level clears the owner before releasing."""
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
        self._lock.release()

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def __enter__(self) -> OwnedRLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _no_more() -> bool:
    return False


class GroupCommitter:
    """The one door of one store's connection (see the module docstring).

    ``lock`` is the store's instance lock (an ``OwnedRLock``, Q9): the
    leader holds it for the whole batch, so reads and other writes of the
    store never interleave with the transaction. ``grouping`` False runs
    each write alone.

    Seeded defects of the conformance self-tests subclass this door (and set
    ``begin``, or wrap ``run_batch``) instead of copying the transaction.
    """

    begin: ClassVar[str] = sql.BEGIN

    def __init__(
        self,
        conn: apsw.Connection,
        busy: BusyDeadline,
        lock: OwnedRLock,
        path: str,
        *,
        grouping: bool = True,
    ) -> None:
        self.conn = conn
        self.cursor = conn.cursor()
        self.lock = lock
        self.path = path
        self.grouping = grouping
        self.closed = False
        # The file the connection opened: every write transaction checks that
        # its path still names it (``_file_identity``).
        self.file = FileIdentity(None if path == MEMORY_PATH else path)
        self._busy = busy
        self._mutex = threading.Lock()
        self._queue: list[Operation[Any]] = []
        self._leading = False
        # The queued operation told to lead the next batch (woken, not yet
        # leading); an interrupted heir passes leadership on (_withdraw).
        self._heir: Operation[Any] | None = None
        # A queued write leading only once its linger is over (``queue``): the
        # next submitted write takes the lead over from it.
        self._lingering: Operation[Any] | None = None
        # Transactions run and operations carried, for benchmarks and tests.
        self.batches = 0
        self.operations = 0
        # Told each transaction's size once it is decided (the store's telemetry).
        self.on_batch: Callable[[int], None] | None = None
        # A handle crossing a fork refuses in the child (it shares the
        # parent's file descriptors and locks): checked before any I/O.
        self.fork = ForkGuard("sqlite")
        # The one thread that leads batches for asyncio callers (and runs
        # their reads): made on first use, so sync-only stores never have it.
        self._worker: HopThreads | None = None

    # -- lifecycle and reads ---------------------------------------------------

    def ensure_open(self, operation: str) -> None:
        self.fork.check(operation)
        if self.closed:
            raise self._closed_error(operation)

    def close(self) -> None:
        """Close cursor and connection; idempotent.

        In a forked child the connection is the parent's: it is only marked
        closed, never closed (closing would act on the parent's file), and
        without the instance lock: a parent thread that held it at the fork
        (a worker finishing a batch whose caller had already resumed) does
        not exist in the child, so the child's copy stays locked forever.
        """
        if self.fork.forked:
            self.closed = True
            return
        with self.lock:
            if self.closed:
                return
            self.closed = True
            # Read after ``closed`` is set: a worker made meanwhile stops itself.
            if self._worker is not None:
                self._worker.stop()  # queued jobs still run, and fail typed
            with translate_errors("close"):
                self.cursor.close()
                self.conn.close()

    def worker(self) -> HopThreads:
        """The thread that leads asyncio callers' batches (made on first use)."""
        with self._mutex:
            if self._worker is None:
                self._worker = HopThreads("rulvar-sqlite")
                if self.closed:  # close() ran before it existed: stopped from birth
                    self._worker.stop()
            return self._worker

    def hop(
        self, loop: asyncio.AbstractEventLoop, operation: str, call: Callable[[], T]
    ) -> asyncio.Future[T]:
        """Run ``call`` whole on the worker thread; its outcome arrives on ``loop``.

        Raises:
            StoreClosedError: the store closed (its worker takes no more jobs).
        """
        future = self.worker().call(loop, call)
        if future is None:
            raise self._closed_error(operation)
        return future

    def _closed_error(self, operation: str) -> StoreClosedError:
        return StoreClosedError(
            f"sqlite {operation} on {self.path}: the store is closed", operation
        )

    def read(
        self, operation: str, statement: str, params: tuple[object, ...]
    ) -> list[apsw.SQLiteValues]:
        """Run one read statement to completion (no hidden read transaction)."""
        self.fork.check(operation)  # before the lock: see ``close``
        with self.lock:
            self.ensure_open(operation)
            self._busy.arm()
            with translate_errors(operation):
                return self.cursor.execute(statement, params).fetchall()

    def read_values(
        self, operation: str, statement: str, params: tuple[object, ...]
    ) -> list[Any]:
        """Run a one-column read to completion and return its values as a list.

        ``Cursor.get`` hands back bare values instead of one tuple per row, the
        cheapest way out of apsw for a long journal.
        """
        self.fork.check(operation)  # before the lock: see ``close``
        with self.lock:
            self.ensure_open(operation)
            self._busy.arm()
            with translate_errors(operation):
                got = self.cursor.execute(statement, params).get
        if got is None:
            return []
        if isinstance(got, list):
            return got
        return [got]  # one row: get returns the bare value

    # -- writes ------------------------------------------------------------------

    def write(
        self,
        operation: str,
        fence: Fence,
        mutate: Mutation[T],
        atomic: bool = False,
    ) -> T:
        """Run ``fence`` and ``mutate`` in ONE ``BEGIN IMMEDIATE`` transaction (Q6).

        Order: BEGIN IMMEDIATE, the fence check (for leased calls the store's
        lease check), the mutation, COMMIT; ROLLBACK on any error, so nothing
        of a refused or failed call is ever visible. Failpoints mark each step
        (``after-commit`` in the caller's thread). Driver errors leave as SPI
        errors (busy -> ``StoreBusyError``). ``atomic`` says ``mutate`` is a
        single statement, which needs no savepoint inside a batch.
        """
        return self.submit(Operation(operation, fence, mutate, atomic))

    def submit(self, op: Operation[T]) -> T:
        """Decide ``op`` (see ``write``) and return its result or raise its error."""
        self.fork.check(op.name)
        # A thread that already holds the lock (re-entrant use) runs alone:
        # queueing behind a leader that needs the same lock would deadlock.
        if not self.grouping or self.lock.held_here():
            with self.lock:
                self._decide([op], _no_more)
        else:
            self._submit(op)
        result = op.outcome()
        hit(op.name, "after-commit")
        return result

    def after_commit(self, op: Operation[Any]) -> None:
        """The caller's own ``after-commit`` failpoint, once its outcome is known."""
        hit(op.name, "after-commit")

    def queue(self, op: Operation[T], linger_s: float) -> Queued[T]:
        """Queue ``op`` to share the next arriving write's COMMIT; ``wait`` for it.

        Call ``wait`` on the result: it returns ``op``'s result (or raises its
        error) once decided. The first write submitted within ``linger_s``
        carries ``op`` in its batch; with none, ``op`` commits alone then. A
        queue behind a running batch joins it as any write would. Queued
        operations keep their order against every later write of the store.
        """
        self.fork.check(op.name)
        if not self.grouping or self.lock.held_here():
            with self.lock:
                self._decide([op], _no_more)
            return Queued(self, op, None)
        lead = self._queue_lingering(op)
        return Queued(self, op, time.monotonic() + linger_s if lead else None)

    def _queue_lingering(self, op: Operation[Any]) -> bool:
        """Queue ``op``; with no batch led, it lingers as the next one's leader (True)."""
        with self._mutex:
            self._queue.append(op)
            lead = not self._leading
            self._leading = True
            if lead:
                self._lingering = op
        return lead

    def flush(self) -> None:
        """Commit a lingering queued write now (a reader must see it); else nothing.

        Takes the lead over as an arriving write would, and returns once that
        batch is decided. A queued write behind a running batch is carried by
        that batch or the next without help.
        """
        self.fork.check("flush")
        with self._mutex:
            take = self._lingering is not None
            self._lingering = None
        if take:
            self._lead(None)

    def _arrived(self) -> bool:
        """A write just queued: whether it takes the lead (the caller holds ``_mutex``)."""
        if self._lingering is not None:
            self._lingering = None  # its linger ends: this write's batch carries it
            return True
        lead = not self._leading
        self._leading = True
        return lead

    def enqueue(self, op: Operation[Any]) -> None:
        """Queue an asyncio caller's ``op``; the worker thread leads if nobody does.

        The caller awaits ``op.resume``'s future, resolved on its loop once
        ``op`` is decided (``_wake_decided``).
        """
        self.ensure_open(op.name)
        with self._mutex:
            self._queue.append(op)
            lead = self._arrived()
            if lead:
                self._heir = op
        if lead:
            self._wake_heir(op)

    def queue_detached(self, op: Operation[Any]) -> bool:
        """Queue an asyncio caller's ``op`` to share the next arriving write's COMMIT.

        ``queue`` for coroutines: returns whether ``op`` lingers as the next
        batch's leader. If so, the first write to arrive takes the lead over
        and carries it; with none, the caller calls ``end_linger`` at its
        deadline and the worker thread commits it. Either way the caller
        awaits ``op.resume``'s future, as for ``enqueue``.
        """
        self.ensure_open(op.name)
        return self._queue_lingering(op)

    def end_linger(self, op: Operation[Any]) -> bool:
        """``op``'s linger ran out: the worker leads its batch now; False if a write took over."""
        with self._mutex:
            if self._lingering is not op:
                return False
            self._lingering = None
            self._heir = op
        self._wake_heir(op)
        return True

    def withdraw_queued(self, op: Operation[Any]) -> bool:
        """Take a cancelled asyncio caller's ``op`` out of the queue, if still there.

        True: it never runs. False: a batch carries it (or carried it) whole.
        A withdrawn heir needs no successor: the worker's leading job runs
        anyway. A withdrawn lingering op (``queue_detached``) hands the lead to
        the next queued op, as an interrupted sync caller's does.
        """
        with self._mutex:
            if op not in self._queue:
                return False
            self._queue.remove(op)
            if self._lingering is not op:
                return True
            self._lingering = None
            heir = self._heir = self._queue[0] if self._queue else None
            if heir is None:
                self._leading = False
        if heir is not None:
            self._wake_heir(heir)
        return True

    def run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        """Run ``batch`` as one transaction; the caller holds the lock.

        Decides every operation: a closed store fails them all typed.
        """
        if self.closed:
            for op in batch:
                op.fail(self._closed_error(op.name))
            return
        self._busy.arm()
        run_batch(
            self.conn,
            self.cursor,
            batch,
            more,
            self.begin,
            lambda: self.file.check(batch[0].name),
        )

    def queued(self) -> int:
        """Operations waiting for the next batch (tests park a leader and count)."""
        with self._mutex:
            return len(self._queue)

    def _submit(self, op: Operation[Any]) -> None:
        """Decide ``op`` in the next batch, leading it if nobody leads."""
        with self._mutex:
            self._queue.append(op)
            lead = self._arrived()
        self._await(op, lead)

    def _await(self, op: Operation[Any], lead: bool) -> None:
        """Lead ``op``'s batch, or sleep until it is decided or leadership is handed over."""
        try:
            if not lead:
                op.wait()
                if op.done:
                    return
            self._lead(op)
        except BaseException:
            # An interrupt (KeyboardInterrupt, SystemExit, an async exception)
            # is this caller's alone: take its operation out of the queue so
            # no leader waits on it, and pass on leadership it was handed.
            self._withdraw(op)
            raise

    def _linger(self, op: Operation[Any], deadline: float) -> bool:
        """A queued leader's wait: until a write takes the lead over, or the deadline.

        Returns whether a write came in time to take the lead over.
        """
        try:
            woken = op.wait_until(deadline)
        except BaseException:
            self._withdraw(op)
            raise
        if not woken:
            with self._mutex:
                lead = self._lingering is op
                self._lingering = None if lead else self._lingering
            if lead:  # nobody came: it commits alone
                self._await(op, lead=True)
                return False
        elif op.done:
            return True
        # Taken over (or handed the lead after an interrupted leader).
        self._await(op, lead=woken)
        return True

    def _withdraw(self, op: Operation[Any]) -> None:
        """Forget an interrupted caller's queued operation (it never runs).

        An operation already taken into a running batch is decided there as a
        whole; its caller just does not wait for the outcome.
        """
        with self._mutex:
            if op in self._queue:
                self._queue.remove(op)
            if self._lingering is op:  # it led, lingering: pass the lead on
                self._lingering = None
                self._heir = op
            if self._heir is not op:
                return
            heir = self._heir = self._queue[0] if self._queue else None
            if heir is None:
                self._leading = False
        if heir is not None:
            self._wake_heir(heir)

    def _lead_detached(self) -> None:
        """The worker thread's turn as leader, for a queue led by asyncio callers."""
        self._lead(None)

    def _wake_heir(self, heir: Operation[Any]) -> None:
        """Make ``heir``'s caller lead: its thread, or the worker for a coroutine.

        A worker stopped by ``close`` runs no more batches: what is queued
        then is failed here, typed, as a batch on a closed store would be.
        """
        if heir.resume is None:
            heir.wake()
        elif not (self._worker or self.worker()).post(self._lead_detached):
            self._fail_queued()

    def _fail_queued(self) -> None:
        """Fail everything queued with ``StoreClosedError`` and wake its callers."""
        with self._mutex:
            queued, self._queue = self._queue, []
            self._heir = None
            self._leading = False
        for op in queued:
            op.fail(self._closed_error(op.name))
        _wake_decided(queued)

    def _lead(self, own: Operation[Any] | None) -> None:
        """Run everything queued as one batch, then wake its callers.

        The batch-mates are woken as soon as the batch is decided, before the
        leader's own bookkeeping (releasing the instance lock, choosing the
        next leader): each of them waits on the leader only for its outcome.
        """
        batch: list[Operation[Any]] = []
        try:
            with self.lock:
                with self._mutex:
                    batch, self._queue = self._queue, []
                    self._heir = None
                self.batches += 1
                self.operations += len(batch)
                self._decide(batch, lambda: self._take_more(batch))
                _wake_decided(batch, own)
        finally:
            self._hand_over(batch, own)

    def _hand_over(
        self, batch: list[Operation[Any]], own: Operation[Any] | None
    ) -> None:
        """Wake the decided callers of ``batch`` and the next leader.

        After an interrupted leader, its batch-mates' operations are still
        undecided (rolled back, never committed): they go back to the front
        of the queue, in order, for the next leader, instead of sharing the
        leader's interrupt. The leader's own operation is dropped.
        """
        with self._mutex:
            again = [op for op in batch if not op.done and op is not own]
            self._queue[:0] = again
            heir = self._heir = self._queue[0] if self._queue else None
            if heir is None:
                self._leading = False
        if heir is not None:
            self._wake_heir(heir)  # not decided: it leads the next batch
        # Normally woken already (``_lead``); after an interrupt or an error
        # this wakes the decided ones, and a second wake is a no-op.
        _wake_decided(batch, own)

    def _settle_interrupted(self, batch: list[Operation[Any]]) -> None:
        """After an interrupt inside ``run_batch``: commit or nothing, never a part.

        ``run_batch`` rolls back an interrupted transaction itself; one still
        open here (an interrupt between its steps) is rolled back too, so
        nothing of the batch is durable and its operations are undecided
        again. With no transaction open, operations still marked applied were
        carried by a COMMIT that returned before the interrupt: they succeeded.
        """
        if self.conn.in_transaction:
            roll_back_applied(self.conn, self.cursor, batch)
            return
        for op in batch:
            if op.applied and not op.done:
                op.succeed(op.result)

    @property
    def busy_retries(self) -> int:
        """How often the busy handler let a call wait and try again."""
        return self._busy.retries

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
            self.run_batch(batch, more)
        except Exception as exc:
            fail_undecided(batch, exc)
            raise
        except BaseException:
            # An interrupt of the leader's thread: settle what is durable,
            # leave the rest undecided for the next leader (_hand_over).
            self._settle_interrupted(batch)
            raise
        for op in batch:
            if not op.done:  # pragma: no cover - a runner bug
                op.fail(ContractError(f"sqlite {op.name}: the batch left it undecided"))
        if self.on_batch is not None:
            self.on_batch(len(batch))


def _wake_decided(ops: list[Operation[Any]], own: Operation[Any] | None = None) -> None:
    """Wake the decided callers of ``ops`` but ``own`` that were not woken yet.

    Threads one by one, coroutines one hop per loop; each operation's caller
    is woken once (``signalled``), however often this runs.
    """
    loops: dict[asyncio.AbstractEventLoop, list[Operation[Any]]] = {}
    for op in ops:
        if not op.done or op.signalled or op is own:
            continue
        if op.resume is None:
            op.wake()
        else:
            loops.setdefault(op.resume[0], []).append(op)
    for loop, resumed in loops.items():
        with suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_resolve, resumed)
        # Marked once sent: an interrupt in between sends a second hop at
        # worst, which ``_resolve`` ignores, never leaves a caller unwoken.
        for op in resumed:
            op.signalled = True


def _resolve(ops: list[Operation[Any]]) -> None:
    """On the callers' loop: mark each operation's batch over and wake its caller.

    The future is read here, on the loop, not by the worker: a cancelled
    caller swaps in a fresh one to wait out its batch (``_async_store``), and
    both run on the loop thread, so whichever comes first, the wait ends.
    """
    for op in ops:
        op.loop_woken = True
        if op.resume is not None and not op.resume[1].done():
            op.resume[1].set_result(None)


@final
class Queued(Generic[T]):
    """A write queued by ``GroupCommitter.queue``: ``wait`` for its outcome."""

    __slots__ = ("_deadline", "_door", "_op", "accompanied")

    def __init__(
        self, door: GroupCommitter, op: Operation[T], deadline: float | None
    ) -> None:
        self._door = door
        self._op = op
        self._deadline = deadline  # set while it leads, lingering
        # Whether a write arrived within the linger (True when it never led).
        self.accompanied = True

    def wait(self) -> T:
        """Return the write's result, or raise its error, once it is decided (durable)."""
        op = self._op
        if not op.done:
            if self._deadline is not None:
                self.accompanied = self._door._linger(op, self._deadline)
            else:
                self._door._await(op, lead=False)
        result = op.outcome()
        hit(op.name, "after-commit")
        return result
