"""AsyncSqliteStore with real files and real concurrency (Q15-Q17, Q5, J6, J7, L7, T6).

Coroutines writing through one store share group commit: one BEGIN IMMEDIATE
... COMMIT for many pending writes, each with its own fence, seq guard and
outcome, each caller resumed only after the shared COMMIT. No SQLite statement
runs on the event-loop thread. A caller cancelled at any point gets
``CancelledError``; its write is all or nothing, no transaction stays open and
another handle can write the file at once. A store used after ``fork``
refuses, typed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import (
    ForkedStoreError,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    StoreBusyError,
    StoreClosedError,
    is_async_store,
    open_store_async,
)
from rulvar_store.backend import set_failpoint_hook
from rulvar_store_sqlite import AsyncSqliteStore, SqliteStore
from rulvar_store_sqlite import _sql as sql

DEADLINE_S = 20.0


@contextmanager
def hook(fn: Callable[[str, str], None]) -> Iterator[None]:
    previous = set_failpoint_hook(fn)
    try:
        yield
    finally:
        set_failpoint_hook(previous)


@contextmanager
def statements(store: AsyncSqliteStore) -> Iterator[list[tuple[str, int]]]:
    """Record (statement, thread id) of everything the store's connection runs."""
    seen: list[tuple[str, int]] = []

    def trace(cursor: object, statement: str, bindings: object) -> bool:
        seen.append((statement, threading.get_ident()))
        return True

    conn = store.sync_store._conn
    conn.exec_trace = trace
    try:
        yield seen
    finally:
        conn.exec_trace = None


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():
            await asyncio.sleep(0.001)


class Park:
    """Parks the worker thread at one failpoint until released (an Event per use)."""

    def __init__(self, operation: str, point: str) -> None:
        self.operation, self.point = operation, point
        self.parked = threading.Event()
        self.release = threading.Event()
        self.used = False

    def __call__(self, operation: str, point: str) -> None:
        if (operation, point) == (self.operation, self.point) and not self.used:
            self.used = True
            self.parked.set()
            assert self.release.wait(DEADLINE_S)

    async def wait_parked(self) -> None:
        assert await asyncio.to_thread(self.parked.wait, DEADLINE_S)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "async.db")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.clause("Q15")
@pytest.mark.clause("J6")
def test_coroutines_share_one_commit_and_no_statement_runs_on_the_loop(
    path: str,
) -> None:
    """8 coroutines x 30 appends: complete ordered journals, fewer commits than writes."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            assert is_async_store(store)
            leases = [await store.acquire(f"r{n}", "w") for n in range(8)]
            door = store._door
            before = (door.batches, door.operations)
            loop_thread = threading.get_ident()

            async def writer(n: int) -> None:
                for seq in range(30):
                    await store.append(f"r{n}", {"seq": seq}, leases[n])

            with statements(store) as seen:
                await asyncio.gather(*(writer(n) for n in range(8)))
            for n in range(8):
                assert await store.load(f"r{n}") == [{"seq": s} for s in range(30)]
            assert door.operations - before[1] == 240
            commits = [s for s, _ in seen if s == sql.COMMIT]
            assert len(commits) == door.batches - before[0]
            assert len(commits) < 240  # writes shared commits
            assert all(thread != loop_thread for _, thread in seen)

    run(scenario())


@pytest.mark.clause("Q15")
@pytest.mark.clause("J7")
@pytest.mark.clause("L7")
def test_each_write_of_a_shared_batch_keeps_its_own_outcome(path: str) -> None:
    """A stale lease and a seq violation fail alone; their batch-mates commit once."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            lead = await store.acquire("lead", "w")
            good = await store.acquire("good", "w")
            await store.append("good", {"seq": 5}, good)
            stale = Lease("good", "w", good.epoch + 7)
            park = Park("append", "after-fence-check")
            with hook(park), statements(store) as seen:
                first = asyncio.create_task(store.append("lead", {"seq": 0}, lead))
                await park.wait_parked()
                mates = [
                    asyncio.create_task(store.append("good", {"seq": 9}, stale)),
                    asyncio.create_task(store.append("good", {"seq": 5}, good)),
                    asyncio.create_task(store.append("good", {"seq": 6}, good)),
                    asyncio.create_task(
                        store.put_meta({"runId": "good", "status": "ok"}, good)
                    ),
                ]
                await until(lambda: store._door.queued() == 4)
                park.release.set()
                outcomes = await asyncio.gather(first, *mates, return_exceptions=True)
            assert outcomes[0] is None
            assert isinstance(outcomes[1], LeaseHeldError)
            assert isinstance(outcomes[2], JournalOrderViolation)
            assert outcomes[3:] == [None, None]
            assert [s for s, _ in seen].count(sql.COMMIT) == 1
            assert [s for s, _ in seen].count(sql.BEGIN) == 1
            assert await store.load("good") == [{"seq": 5}, {"seq": 6}]
            assert await store.get_meta("good") == {"runId": "good", "status": "ok"}

    run(scenario())


@pytest.mark.clause("Q15")
def test_a_caller_resumes_only_after_the_shared_commit(path: str) -> None:
    """Parked before COMMIT, the awaiting task stays pending; another handle sees nothing."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path) as store:
            park = Park("append", "before-commit")
            with hook(park):
                task = asyncio.create_task(store.append("r", {"seq": 1}))
                await park.wait_parked()
                await asyncio.sleep(0.05)
                assert not task.done()
                with SqliteStore(path) as other:
                    assert other.load("r") == []
                park.release.set()
                await task
            with SqliteStore(path) as other:
                assert other.load("r") == [{"seq": 1}]

    run(scenario())


def _sync_session(store: SqliteStore) -> None:
    lease = store.acquire("r", "w")
    for seq in range(3):
        store.append("r", {"seq": seq}, lease)
    store.append("free", {"seq": 0})
    store.put_meta({"runId": "r", "status": "ok"}, lease)
    store.renew(lease)
    store.release(lease)


async def _async_session(store: AsyncSqliteStore) -> None:
    lease = await store.acquire("r", "w")
    for seq in range(3):
        await store.append("r", {"seq": seq}, lease)
    await store.append("free", {"seq": 0})
    await store.put_meta({"runId": "r", "status": "ok"}, lease)
    await store.renew(lease)
    await store.release(lease)


@pytest.mark.clause("Q6")
@pytest.mark.clause("Q15")
def test_a_lone_coroutine_runs_exactly_the_statements_of_the_sync_store(
    tmp_path: Path,
) -> None:
    """One coroutine's writes: the sync store's statements, one transaction each, no more.

    The same writes (acquire, leased and unleased appends, put_meta, renew,
    release) through a ``SqliteStore`` and, on another file, one coroutine
    through an ``AsyncSqliteStore``: the two connections run the same
    statements in the same order, each write its own BEGIN IMMEDIATE ...
    COMMIT, none of them on the loop thread.
    """
    with SqliteStore(str(tmp_path / "sync.db"), ttl_ms=600_000) as sync_store:
        sync_seen: list[str] = []

        def trace(cursor: object, statement: str, bindings: object) -> bool:
            sync_seen.append(statement)
            return True

        sync_store._conn.exec_trace = trace
        _sync_session(sync_store)
        sync_store._conn.exec_trace = None

    async def scenario() -> list[tuple[str, int]]:
        async with await AsyncSqliteStore.open(
            str(tmp_path / "async.db"), ttl_ms=600_000
        ) as store:
            with statements(store) as seen:
                await _async_session(store)
            return seen

    loop_thread = threading.get_ident()
    async_seen = run(scenario())
    assert [statement for statement, _ in async_seen] == sync_seen
    assert sync_seen.count(sql.BEGIN) == sync_seen.count(sql.COMMIT) == 8
    assert all(thread != loop_thread for _, thread in async_seen)


@pytest.mark.clause("Q15")
def test_batch_mates_resume_before_the_leader_hands_over(path: str) -> None:
    """Coroutines of a batch resume once COMMIT returns, not after the leader's own steps.

    The worker leads four appends as one batch, parked before its COMMIT;
    the test then holds the door's queue mutex, which the leader needs to
    hand over. All four callers still resume, with their writes visible
    to a second handle, before the leader gets the mutex.
    """

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            door = store._door
            leases = [await store.acquire(f"r{n}", "w") for n in range(4)]
            fence = Park("append", "after-fence-check")
            commit = Park("append", "before-commit")

            def pause(operation: str, point: str) -> None:
                fence(operation, point)
                commit(operation, point)

            with hook(pause):
                tasks = [asyncio.create_task(store.append("r0", {"seq": 0}, leases[0]))]
                await fence.wait_parked()
                tasks += [
                    asyncio.create_task(store.append(f"r{n}", {"seq": 0}, leases[n]))
                    for n in range(1, 4)
                ]
                await until(lambda: door.queued() == 3)
                fence.release.set()
                await commit.wait_parked()
                with door._mutex:  # the leader's hand-over waits for it
                    commit.release.set()
                    # Not cancelled on a miss: a cancelled caller would need
                    # the mutex this loop thread holds.
                    _, pending = await asyncio.wait(tasks, timeout=DEADLINE_S)
                    with SqliteStore(path) as other:
                        landed = [other.load(f"r{n}") for n in range(4)]
                assert not pending, "a batch-mate waited for the leader's hand-over"
                assert landed == [[{"seq": 0}]] * 4
                await asyncio.gather(*tasks)
            assert door.queued() == 0
            await store.append("r0", {"seq": 1}, leases[0])  # the leader handed over
            assert await store.load("r0") == [{"seq": 0}, {"seq": 1}]

    run(scenario())


def _second_handle_writes_at_once(path: str) -> None:
    """No transaction and no file lock left behind: a fail-fast handle writes."""
    with SqliteStore(path, busy_timeout_ms=0) as other:
        other.append("probe", {"note": "free"})


@pytest.mark.clause("Q16")
@pytest.mark.parametrize("point", ["after-begin", "after-fence-check", "before-commit"])
def test_cancelled_inside_the_batch_the_write_lands_whole_then_cancelled_error(
    path: str, point: str
) -> None:
    """The batch carrying the write ends first; the caller then gets CancelledError."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            lease = await store.acquire("r", "w")
            park = Park("append", point)
            with hook(park):
                task = asyncio.create_task(store.append("r", {"seq": 1}, lease))
                await park.wait_parked()
                task.cancel()
                await asyncio.sleep(0.05)
                assert not task.done()  # still waiting for its batch to end
                park.release.set()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await store.load("r") == [{"seq": 1}]
            assert not store.sync_store._conn.in_transaction
            assert store._door.queued() == 0
            _second_handle_writes_at_once(path)
            await store.append("r", {"seq": 2}, lease)  # still usable

    run(scenario())


@pytest.mark.clause("Q16")
def test_cancelled_while_queued_the_write_never_runs(path: str) -> None:
    """Queued behind a parked batch: cancel takes it out at once, nothing is written."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            lease = await store.acquire("q", "w")
            park = Park("append", "after-fence-check")
            with hook(park):
                first = asyncio.create_task(store.append("lead", {"seq": 0}))
                await park.wait_parked()
                queued = asyncio.create_task(store.append("q", {"seq": 1}, lease))
                await until(lambda: store._door.queued() == 1)
                queued.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await queued  # while the batch is still parked
                assert store._door.queued() == 0
                park.release.set()
                await first
            assert await store.load("q") == []
            assert await store.load("lead") == [{"seq": 0}]
            assert not store.sync_store._conn.in_transaction
            _second_handle_writes_at_once(path)
            await store.append("q", {"seq": 1}, lease)

    run(scenario())


@pytest.mark.clause("Q16")
def test_cancelled_after_its_commit_before_it_resumed_the_write_stays_landed(
    path: str,
) -> None:
    """A cancel racing the resume of a committed write: CancelledError, the write kept.

    The loop thread is held (a blocking wait inside the loop) while the
    parked batch commits, so the cancel usually lands after the door has
    sent the resume and before the loop has run it; in any order the caller
    gets CancelledError, the write is there once, and nothing hangs.
    """

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            lease = await store.acquire("r", "w")
            park = Park("append", "before-commit")
            with hook(park):
                task = asyncio.create_task(store.append("r", {"seq": 1}, lease))
                await park.wait_parked()
                park.release.set()
                # Blocks the loop on purpose: the batch commits meanwhile.
                threading.Event().wait(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await store.load("r") == [{"seq": 1}]
            assert store._door.queued() == 0
            _second_handle_writes_at_once(path)
            await store.append("r", {"seq": 2}, lease)

    run(scenario())


@pytest.mark.clause("X7")
def test_close_racing_queued_coroutines_ends_each_typed_or_done(path: str) -> None:
    """Coroutines queued behind a parked batch when close() runs: typed error or done.

    A sync thread leads a batch parked before its COMMIT; three coroutines
    queue behind it; another thread calls close(), which waits for the
    batch. Each coroutine then either ran before the close (its write is
    there) or gets StoreClosedError; none hangs and none gets a raw error.
    """

    async def scenario() -> None:
        store = await AsyncSqliteStore.open(path)
        sync = store.sync_store
        park = Park("append", "before-commit")
        with hook(park):
            leader = threading.Thread(target=sync.append, args=("lead", {"seq": 0}))
            leader.start()
            await park.wait_parked()
            queued = [
                asyncio.create_task(store.append(f"q{n}", {"seq": 1})) for n in range(3)
            ]
            await until(lambda: store._door.queued() == 3)
            closer = threading.Thread(target=sync.close)
            closer.start()
            park.release.set()
            async with asyncio.timeout(DEADLINE_S):
                outcomes = await asyncio.gather(*queued, return_exceptions=True)
            await asyncio.to_thread(leader.join, DEADLINE_S)
            await asyncio.to_thread(closer.join, DEADLINE_S)
        assert all(o is None or isinstance(o, StoreClosedError) for o in outcomes)
        await store.aclose()  # idempotent after the sync close
        with SqliteStore(path) as other:
            assert other.load("lead") == [{"seq": 0}]
            for n, outcome in enumerate(outcomes):
                assert other.load(f"q{n}") == ([{"seq": 1}] if outcome is None else [])

    run(scenario())


@pytest.mark.clause("Q16")
def test_a_timeout_around_a_read_leaves_the_store_usable(path: str) -> None:
    """asyncio.timeout cancelling a read: the read ends whole first, nothing stays open."""

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path) as store:
            await store.append("r", {"seq": 1})
            gate = threading.Event()
            real = store.sync_store.load

            def slow_load(run_id: str) -> Any:
                gate.wait(DEADLINE_S)
                return real(run_id)

            store.sync_store.load = slow_load  # type: ignore[method-assign]  # a slow read
            asyncio.get_running_loop().call_later(0.2, gate.set)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(store.load("r"), 0.05)
            assert gate.is_set()  # the timeout waited for the read to end whole
            del store.sync_store.load
            assert await store.load("r") == [{"seq": 1}]

    run(scenario())


@pytest.mark.clause("Q5")
def test_every_async_write_is_bounded_by_the_busy_deadline(path: str) -> None:
    """Another connection holds the write lock: StoreBusyError after busy_timeout_ms."""
    SqliteStore(path).close()

    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, busy_timeout_ms=100) as store:
            holder = SqliteStore(path)
            holder._conn.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreBusyError):
                    await store.append("r", {"seq": 1})
            finally:
                holder._conn.execute("ROLLBACK")
                holder.close()
            await store.append("r", {"seq": 1})

    run(scenario())


@pytest.mark.clause("T6")
def test_the_blob_twin_shares_the_door_and_the_fence(path: str) -> None:
    async def scenario() -> None:
        async with await AsyncSqliteStore.open(path, ttl_ms=600_000) as store:
            blobs = store.transcripts()
            assert is_async_store(blobs)
            lease = await store.acquire("r", "w")
            await blobs.put("r/a", b"one", lease)
            await store.release(lease)
            with pytest.raises(LeaseHeldError):
                await blobs.put("r/a", b"stale", lease)
            assert await blobs.get("r/a") == b"one"
            assert await blobs.list_refs("r") == ["r/a"]
            await blobs.delete("r/a")
            assert await blobs.get("r/a") is None

    run(scenario())


@pytest.mark.clause("Q15")
def test_open_store_async_opens_the_native_store(path: str) -> None:
    async def scenario() -> None:
        async with open_store_async(f"sqlite:///{path}") as opened:
            assert isinstance(opened.journal, AsyncSqliteStore)
            await opened.journal.append("r", {"seq": 1})
            await opened.transcripts.put("r/x", b"x")
        with pytest.raises(StoreClosedError):
            await opened.journal.append("r", {"seq": 2})

    run(scenario())


def _in_child(action: Callable[[], object]) -> int:
    """Fork; the child runs ``action`` and exits 0 on ForkedStoreError, 1 otherwise.

    A child still running after ``DEADLINE_S`` is killed (exit code -9), so a
    child that hangs fails the test instead of holding it.
    """
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        code = 1
        try:
            action()
        except ForkedStoreError:
            code = 0
        except BaseException:
            code = 2
        os._exit(code)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -signal.SIGKILL
        time.sleep(0.01)


@pytest.mark.clause("Q17")
@pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)
def test_a_store_used_after_fork_refuses_typed_and_the_parent_goes_on(
    path: str,
) -> None:
    """Sync and async handles in a forked child raise ForkedStoreError; the parent writes."""
    sync_store = SqliteStore(path)
    sync_store.append("r", {"seq": 1})
    assert _in_child(lambda: sync_store.append("r", {"seq": 2})) == 0
    assert _in_child(lambda: print(sync_store.load("r"))) == 0
    sync_store.close()

    async def opened() -> AsyncSqliteStore:
        return await AsyncSqliteStore.open(path)

    store = run(opened())
    run(store.append("r", {"seq": 3}))  # the worker thread exists before the fork

    def async_write() -> None:
        asyncio.run(store.append("r", {"seq": 4}))

    def async_close_then_write() -> None:
        asyncio.run(store.aclose())  # touches nothing of the parent's
        asyncio.run(store.load("r"))

    assert _in_child(async_write) == 0
    assert _in_child(async_close_then_write) == 0
    run(store.append("r", {"seq": 5}))
    assert run(store.load("r")) == [{"seq": 1}, {"seq": 3}, {"seq": 5}]
    run(store.aclose())


@pytest.mark.clause("Q17")
@pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)
def test_a_child_forked_while_a_batch_holds_the_lock_refuses_and_closes(
    path: str,
) -> None:
    """Forked while a parent thread holds the store's lock: the child never waits for it.

    A parent thread's write is parked inside its transaction (holding the
    instance lock) when the process forks. In the child that lock stays
    locked forever; its reads and its blob twin still refuse with
    ForkedStoreError, and close and aclose return at once. The parent's
    write then commits.
    """
    sync_store = SqliteStore(path)
    store = run(AsyncSqliteStore.open(path))
    parked, release = threading.Event(), threading.Event()

    def pause(operation: str, point: str) -> None:
        if threading.current_thread().name == "holder" and point == "after-begin":
            parked.set()
            assert release.wait(DEADLINE_S)

    def child_uses_both() -> None:
        sync_store.close()
        asyncio.run(store.aclose())
        sync_store.load("r")

    def child_reads_sync() -> None:
        sync_store.load("r")

    with hook(pause):
        holders = [
            threading.Thread(
                target=partial(held.append, run_id, {"seq": 1}), name="holder"
            )
            for held, run_id in ((sync_store, "a"), (store.sync_store, "b"))
        ]
        for holder in holders:
            parked.clear()
            release.clear()
            holder.start()
            assert parked.wait(DEADLINE_S)
            assert _in_child(child_reads_sync) == 0
            assert _in_child(sync_store.transcripts) == 0
            assert _in_child(child_uses_both) == 0
            release.set()
            holder.join(DEADLINE_S)
            assert not holder.is_alive()
    assert [sync_store.load(run_id) for run_id in ("a", "b")] == [[{"seq": 1}]] * 2
    sync_store.close()
    run(store.aclose())
