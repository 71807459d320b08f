"""Group commit of one SqliteStore with real threads (J1, J2, J6, J7, L7, Q6, Q7, Q9).

Threads writing through one store share a transaction: each operation keeps its
own fence check, seq guard and outcome (a refused one is undone alone), and the
batch commits all or nothing. To make a batch deterministic, a failpoint hook
parks the current leader inside its transaction until the other callers are
queued; they then join the leader's transaction before its commit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import apsw
import pytest

from rulvar_store import (
    ConfigError,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    StoreBusyError,
)
from rulvar_store.backend import set_failpoint_hook
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._transaction import SAVEPOINT, Operation

DEADLINE_S = 20.0


@pytest.fixture
def gc_store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "gc.db"), ttl_ms=600_000) as opened:
        yield opened


@contextmanager
def hook(fn: Callable[[str, str], None]) -> Iterator[None]:
    previous = set_failpoint_hook(fn)
    try:
        yield
    finally:
        set_failpoint_hook(previous)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the queue"
        time.sleep(0.001)


class Calls:
    """Start callers in threads; collect each one's result or exception."""

    def __init__(self) -> None:
        self.outcomes: dict[str, tuple[str, Any]] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = ("ok", call())
            except BaseException as exc:  # the outcome is what is checked
                self.outcomes[name] = ("error", exc)

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(DEADLINE_S)
            assert not thread.is_alive(), f"{thread.name} never returned"


def queued(store: SqliteStore) -> int:
    group = store._door
    assert group.grouping
    return group.queued()


def has_queued(store: SqliteStore, count: int) -> bool:
    return queued(store) == count


def park_leader(
    store: SqliteStore,
    calls: Calls,
    lease: Lease,
    behind: list[tuple[str, Callable[[], Any]]],
) -> None:
    """Run one leased append that parks inside its transaction until ``behind`` queue.

    ``behind`` callers start while the parked leader holds the connection, so
    they join its transaction as late joiners: one batch of all of them. Each
    starts only once the one before it is queued, so the batch runs them in
    the order given.
    """
    parked = threading.Event()
    release = threading.Event()

    def pause(operation: str, point: str) -> None:
        if threading.current_thread().name == "leader" and point == "after-fence-check":
            parked.set()
            assert release.wait(DEADLINE_S)

    with hook(pause):
        calls.start("leader", lambda: store.append(lease.run_id, {"seq": 0}, lease))
        assert parked.wait(DEADLINE_S)
        for count, (name, call) in enumerate(behind, 1):
            calls.start(name, call)
            wait_until(partial(has_queued, store, count))
        release.set()
        calls.join()


@pytest.mark.clause("J7")
@pytest.mark.clause("L7")
@pytest.mark.clause("J6")
def test_refused_operations_fail_alone_while_their_batch_mates_commit(
    gc_store: SqliteStore,
) -> None:
    """In one batch, a stale lease and a seq violation raise to their own callers only.

    Their batch-mates commit; nothing of a refused operation is visible.
    """
    store = gc_store
    lead = store.acquire("lead", "w")
    good = store.acquire("good", "w")
    other = store.acquire("other", "w")
    stale = Lease("good", "w", good.epoch + 7)  # never the live lease
    store.append("other", {"seq": 5}, other)
    group = store._door
    assert group.grouping
    before = (group.batches, group.operations)
    calls = Calls()
    park_leader(
        store,
        calls,
        lead,
        [
            ("stale", lambda: store.append("good", {"seq": 99, "by": "stale"}, stale)),
            ("good-1", lambda: store.append("good", {"seq": 1}, good)),
            ("order", lambda: store.append("other", {"seq": 5, "dup": True}, other)),
            (
                "meta",
                lambda: store.put_meta({"runId": "good", "status": "running"}, good),
            ),
        ],
    )
    outcomes = calls.outcomes
    assert outcomes["leader"] == ("ok", None)
    assert outcomes["good-1"] == ("ok", None)
    assert outcomes["meta"] == ("ok", None)
    assert outcomes["stale"][0] == "error"
    assert isinstance(outcomes["stale"][1], LeaseHeldError)
    assert outcomes["order"][0] == "error"
    assert isinstance(outcomes["order"][1], JournalOrderViolation)
    assert store.load("good") == [{"seq": 1}]
    assert store.load("other") == [{"seq": 5}]
    assert store.get_meta("good") == {"runId": "good", "status": "running"}
    assert store.load("lead") == [{"seq": 0}]
    # The four queued callers joined the leader's transaction: ONE commit.
    assert (group.batches - before[0], group.operations - before[1]) == (1, 5)
    assert not store._conn.in_transaction


@pytest.mark.clause("J1")
@pytest.mark.clause("Q6")
def test_a_failure_at_commit_fails_the_whole_batch_and_leaves_nothing(
    gc_store: SqliteStore,
) -> None:
    """A failpoint raising at before-commit fails every applied caller; none is visible.

    A refused operation in the same batch still gets its own error.
    """
    store = gc_store
    lead = store.acquire("lead", "w")
    leases = [store.acquire(f"r{n}", "w") for n in range(3)]
    calls = Calls()
    armed = threading.Event()

    def boom(operation: str, point: str) -> None:
        if armed.is_set() and point == "before-commit":
            raise RuntimeError("injected commit failure")

    behind: list[tuple[str, Callable[[], Any]]] = [
        (f"r{n}", partial(store.append, f"r{n}", {"seq": 1}, leases[n]))
        for n in range(3)
    ]
    behind.append(
        ("stale", lambda: store.append("r0", {"seq": 2}, Lease("r0", "x", 1)))
    )
    group = store._door
    assert group.grouping
    before = (group.batches, group.operations)
    parked = threading.Event()
    release = threading.Event()

    def pause_then_boom(operation: str, point: str) -> None:
        if threading.current_thread().name == "leader" and point == "after-fence-check":
            parked.set()
            assert release.wait(DEADLINE_S)
            armed.set()
            return
        boom(operation, point)

    with hook(pause_then_boom):
        calls.start("leader", lambda: store.append("lead", {"seq": 0}, lead))
        assert parked.wait(DEADLINE_S)
        for name, call in behind:
            calls.start(name, call)
        wait_until(lambda: queued(store) == len(behind))
        release.set()
        calls.join()
    outcomes = calls.outcomes
    assert (group.batches - before[0], group.operations - before[1]) == (1, 5)
    # The leader's own operation shares the failed commit.
    assert outcomes["leader"][0] == "error"
    for n in range(3):
        kind, error = outcomes[f"r{n}"]
        assert kind == "error"
        assert isinstance(error, RuntimeError)
        assert str(error) == "injected commit failure"
    assert isinstance(outcomes["stale"][1], LeaseHeldError)
    # Each caller got its own exception object.
    errors = [outcomes[name][1] for name in ("leader", "r0", "r1", "r2")]
    assert len({id(error) for error in errors}) == 4
    for n in range(3):
        assert store.load(f"r{n}") == []
    assert store.load("lead") == []
    assert not store._conn.in_transaction
    store.append("r0", {"seq": 1}, leases[0])  # the store is fine afterwards
    assert store.load("r0") == [{"seq": 1}]


@pytest.mark.clause("Q5")
def test_a_busy_begin_fails_every_caller_of_the_batch_typed(tmp_path: Path) -> None:
    """When another process holds the write lock, each batched caller gets StoreBusyError."""
    path = str(tmp_path / "busy.db")
    holder_script = textwrap.dedent(
        """
        import sys, apsw
        conn = apsw.Connection(sys.argv[1])
        conn.execute("BEGIN IMMEDIATE")
        print("holding", flush=True)
        sys.stdin.readline()
        conn.execute("ROLLBACK")
        """
    )
    with SqliteStore(path, busy_timeout_ms=300) as store:
        group = store._door
        assert group.grouping
        with subprocess.Popen(
            [sys.executable, "-c", holder_script, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline().strip() == "holding"
            calls = Calls()
            for n in range(4):
                calls.start(f"t{n}", partial(store.append, f"run{n}", {"seq": 0}))
            calls.join()
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.wait(timeout=30) == 0
        for n in range(4):
            kind, error = calls.outcomes[f"t{n}"]
            assert kind == "error"
            assert isinstance(error, StoreBusyError)
            assert store.load(f"run{n}") == []
        assert not store._conn.in_transaction


@pytest.mark.clause("J2")
@pytest.mark.clause("Q9")
def test_many_threads_through_one_store_give_complete_ordered_journals(
    gc_store: SqliteStore,
) -> None:
    """8 threads x 60 appends: every journal complete and in order; batches did form."""
    store = gc_store
    group = store._door
    assert group.grouping
    leases = [store.acquire(f"run{n}", f"w{n}") for n in range(8)]
    ops_before, batches_before = group.operations, group.batches
    calls = Calls()
    for n in range(8):

        def writer(n: int = n) -> None:
            for seq in range(60):
                store.append(f"run{n}", {"seq": seq, "w": n}, leases[n])
                if seq % 20 == 0:
                    assert len(store.load(f"run{n}")) == seq + 1  # read-your-writes

        calls.start(f"w{n}", writer)
    calls.join()
    assert all(kind == "ok" for kind, _ in calls.outcomes.values()), calls.outcomes
    for n in range(8):
        assert store.load(f"run{n}") == [{"seq": s, "w": n} for s in range(60)]
    assert group.operations - ops_before == 8 * 60
    assert group.batches - batches_before <= 8 * 60


@contextmanager
def statements(store: SqliteStore) -> Iterator[list[str]]:
    """Record every SQL statement the store's connection runs meanwhile."""
    seen: list[str] = []

    def trace(cursor: object, statement: str, bindings: object) -> bool:
        seen.append(statement)
        return True

    store._conn.exec_trace = trace
    try:
        yield seen
    finally:
        store._conn.exec_trace = None


@pytest.mark.clause("Q6")
@pytest.mark.clause("Q7")
def test_a_lone_caller_runs_alone_without_savepoints(gc_store: SqliteStore) -> None:
    """One thread never waits for company: one batch of one per call.

    Its transaction is exactly that of ``group_commit=False``: BEGIN IMMEDIATE,
    the one insert that checks the fence and the seq guard, COMMIT; no
    savepoint. A refused insert runs the fence alone to say which refused.
    """
    store = gc_store
    group = store._door
    assert group.grouping
    lease = store.acquire("solo", "w")
    before = (group.batches, group.operations)
    with statements(store) as seen:
        for seq in range(20):
            store.append("solo", {"seq": seq}, lease)
    assert (group.batches - before[0], group.operations - before[1]) == (20, 20)
    assert seen == [sql.BEGIN, sql.INSERT_ENTRY_FENCED_ABOVE_TAIL, sql.COMMIT] * 20
    with statements(store) as seen, pytest.raises(JournalOrderViolation):
        store.append("solo", {"seq": 3}, lease)
    assert seen == [
        sql.BEGIN,
        sql.INSERT_ENTRY_FENCED_ABOVE_TAIL,
        sql.LIVE_LEASE_MATCHES,
        sql.ROLLBACK,
    ]


class _OwnFence(SqliteStore):
    """Replaces the fence (the Q13 seam the kit's seeded defects use)."""

    checked = 0

    def _assert_fencing(self, lease: Lease) -> None:
        self.checked += 1
        super()._assert_fencing(lease)


@pytest.mark.clause("Q13")
def test_a_replaced_fence_still_runs_before_every_leased_append(
    tmp_path: Path,
) -> None:
    """A subclass's own ``_assert_fencing`` runs on every leased append, before its insert."""
    store = _OwnFence(str(tmp_path / "own-fence.db"))
    try:
        lease = store.acquire("run", "w")
        with statements(store) as seen:
            store.append("run", {"seq": 0}, lease)
        assert store.checked == 1
        assert seen == [
            sql.BEGIN,
            sql.LIVE_LEASE_MATCHES,
            sql.INSERT_ENTRY_ABOVE_TAIL,
            sql.COMMIT,
        ]
    finally:
        store.close()


@pytest.mark.clause("J7")
def test_a_stale_lease_with_a_stale_seq_is_refused_as_a_stale_lease(
    gc_store: SqliteStore,
) -> None:
    """J7 order through the one fenced insert: the fence's refusal comes before the seq's."""
    store = gc_store
    old = store.acquire("run", "a")
    store.append("run", {"seq": 5}, old)
    store.release(old)
    store.acquire("run", "b")
    with pytest.raises(LeaseHeldError):
        store.append("run", {"seq": 1}, old)  # seq 1 is below the tail too
    with pytest.raises(LeaseHeldError):
        store.append("run", {"seq": 6}, old)
    assert [e["seq"] for e in store.load("run")] == [5]


@pytest.mark.clause("Q6")
@pytest.mark.clause("L7")
@pytest.mark.clause("T6")
def test_only_multi_statement_writes_take_a_savepoint_in_a_batch(
    gc_store: SqliteStore,
) -> None:
    """Every write surface in one batch: savepoints for acquire and delete alone.

    The single-statement writes (append, put_meta, renew, release, blob put and
    delete) rely on SQLite undoing a failed statement; each still commits.
    """
    store = gc_store
    blobs = store.transcripts()
    lead = store.acquire("lead", "w")
    mine = store.acquire("mine", "w")
    store.append("doomed", {"seq": 0})
    blobs.put("mine/old", b"old", mine)
    calls = Calls()
    with statements(store) as seen:
        park_leader(
            store,
            calls,
            lead,
            [
                ("append", lambda: store.append("mine", {"seq": 1}, mine)),
                (
                    "meta",
                    lambda: store.put_meta({"runId": "mine", "status": "ok"}, mine),
                ),
                ("renew", lambda: store.renew(mine)),
                ("put", lambda: blobs.put("mine/new", b"new", mine)),
                ("blob-delete", lambda: blobs.delete("mine/old", mine)),
                ("acquire", lambda: store.acquire("fresh", "w")),
                ("delete", lambda: store.delete("doomed")),
                ("release", lambda: store.release(lease=mine)),
            ],
        )
    names = ["leader", "append", "meta", "renew", "put", "blob-delete"]
    names += ["acquire", "delete", "release"]
    outcomes = {name: kind for name, (kind, _) in calls.outcomes.items()}
    assert outcomes == dict.fromkeys(names, "ok"), calls.outcomes
    assert seen.count(sql.BEGIN) == 1
    assert seen.count(sql.COMMIT) == 1
    assert seen.count(SAVEPOINT) == 2  # acquire and delete
    assert store.load("mine") == [{"seq": 1}]
    assert store.get_meta("mine") == {"runId": "mine", "status": "ok"}
    assert blobs.list_refs("mine") == ["mine/new"]
    assert store.load("doomed") == []
    assert store.peek_lease("mine") is None
    assert store.peek_lease("fresh") is not None


def _op(
    name: str, *statements_: str, atomic: bool, fail: bool = False
) -> Operation[None]:
    """An operation running ``statements_``, then raising if ``fail``."""

    def mutate(cursor: apsw.Cursor) -> None:
        for statement in statements_:
            cursor.execute(statement)
        if fail:
            raise JournalOrderViolation(f"{name} refused", name, 0)

    return Operation(name, None, mutate, atomic)


def _insert(run_id: str, seq: int) -> str:
    return f"INSERT INTO entries (run_id, payload) VALUES ('{run_id}', '{{\"seq\": {seq}}}')"


@pytest.mark.clause("J1")
@pytest.mark.clause("Q6")
def test_each_way_an_operation_fails_undoes_it_alone(gc_store: SqliteStore) -> None:
    """A failing operation leaves no trace; its batch-mates commit (run_batch).

    First in the batch (nothing else applied: the whole transaction is rolled
    back and begun again), multi-statement after an applied one (its
    savepoint), a single statement refused by SQLite (its own statement
    rollback) and a single-statement operation refused before any change.
    """
    store = gc_store
    null_payload = "INSERT INTO entries (run_id, payload) VALUES ('bad', NULL)"
    batch = [
        _op("first", _insert("first", 1), atomic=False, fail=True),
        _op("a", _insert("a", 1), atomic=True),
        _op("multi", _insert("multi", 1), _insert("multi", 2), atomic=False, fail=True),
        _op("b", _insert("b", 1), atomic=True),
        _op("constraint", null_payload, atomic=True),
        _op("c", _insert("c", 1), atomic=False),
        _op("refused", atomic=True, fail=True),
    ]
    with statements(store) as seen, store._lock:
        store._door.run_batch(batch, lambda: False)
    assert [op.done for op in batch] == [True] * 7
    failed = {op.name: type(op.error).__name__ for op in batch if op.error}
    assert failed == {
        "first": "JournalOrderViolation",
        "multi": "JournalOrderViolation",
        "constraint": "ContractError",
        "refused": "JournalOrderViolation",
    }
    for run_id in ("first", "multi", "bad"):
        assert store.load(run_id) == []
    for run_id in ("a", "b", "c"):
        assert store.load(run_id) == [{"seq": 1}]
    assert seen.count(sql.BEGIN) == 2  # the first failure rolled back and began anew
    assert seen.count(sql.COMMIT) == 1
    assert seen.count(SAVEPOINT) == 2  # only multi-statement ops after an applied one
    assert not store._conn.in_transaction


@pytest.mark.clause("J1")
def test_an_atomic_operation_raising_after_its_change_fails_the_whole_batch(
    gc_store: SqliteStore,
) -> None:
    """Declared single-statement but raising after a row changed: nothing commits.

    Such an operation cannot be undone alone without a savepoint, so the batch
    fails as a whole (each applied caller gets the error) instead of
    committing the refused operation's row.
    """
    store = gc_store
    batch = [
        _op("a", _insert("a", 1), atomic=True),
        _op("liar", _insert("liar", 1), atomic=True, fail=True),
        _op("b", _insert("b", 1), atomic=True),
    ]
    with store._lock:
        store._door.run_batch(batch, lambda: False)
    assert all(isinstance(op.error, JournalOrderViolation) for op in batch)
    for run_id in ("a", "liar", "b"):
        assert store.load(run_id) == []
    assert not store._conn.in_transaction


def test_group_commit_can_be_turned_off_and_is_validated(tmp_path: Path) -> None:
    """group_commit=False keeps one transaction per call; a non-bool is a ConfigError."""
    with SqliteStore(str(tmp_path / "off.db"), group_commit=False) as store:
        assert store._door.grouping is False
        store.append("r", {"seq": 1})
        assert store.load("r") == [{"seq": 1}]
    with pytest.raises(ConfigError):
        SqliteStore(str(tmp_path / "bad.db"), group_commit="yes")  # type: ignore[arg-type]


TWO_PROCESS_WRITER = textwrap.dedent(
    """
    import sys, threading
    from rulvar_store_sqlite import SqliteStore
    path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SqliteStore(path, busy_timeout_ms=20_000)
    leases = [store.acquire(f"{tag}-{n}", tag) for n in range(4)]
    def writer(n):
        for seq in range(count):
            store.append(f"{tag}-{n}", {"seq": seq}, leases[n])
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    store.close()
    print("done", flush=True)
    """
)


@pytest.mark.clause("J2")
def test_two_processes_of_threads_on_one_file_give_complete_ordered_journals(
    tmp_path: Path,
) -> None:
    """2 processes x 4 threads, each batching through its own store on one file."""
    path = str(tmp_path / "shared.db")
    SqliteStore(path).close()
    count = 40
    children = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESS_WRITER, path, tag, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p1", "p2")
    ]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert out.strip() == "done"
    with SqliteStore(path) as store:
        for tag in ("p1", "p2"):
            for n in range(4):
                assert store.load(f"{tag}-{n}") == [{"seq": s} for s in range(count)]


KILL_IN_BATCH = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from rulvar_store import set_failpoint_hook
    from rulvar_store_sqlite import SqliteStore
    store = SqliteStore(sys.argv[1])
    leases = [store.acquire(f"k{n}", "w") for n in range(3)]
    for n in range(3):
        store.append(f"k{n}", {"seq": 0}, leases[n])
    parked, release = threading.Event(), threading.Event()
    def hook(operation, point):
        name = threading.current_thread().name
        if name == "leader" and point == "after-fence-check" and not release.is_set():
            parked.set(); release.wait(30)
        elif point == "before-commit" and release.is_set():
            # The two queued appends joined the leader's transaction: all three
            # are applied, and the process dies before the shared COMMIT.
            os.kill(os.getpid(), signal.SIGKILL)
    set_failpoint_hook(hook)
    lead = threading.Thread(name="leader", target=lambda: store.append("k0", {"seq": 1}, leases[0]))
    lead.start(); parked.wait(30)
    for n in (1, 2):
        threading.Thread(name=f"t{n}", target=lambda n=n: store.append(f"k{n}", {"seq": 1}, leases[n])).start()
    while store._door.queued() < 2:
        time.sleep(0.001)
    release.set()
    time.sleep(30)
    """
)


@pytest.mark.clause("J1")
def test_a_kill_before_the_shared_commit_leaves_none_of_the_batch(
    tmp_path: Path,
) -> None:
    """SIGKILL at before-commit of a batch: after reopening, no operation of it is visible."""
    path = str(tmp_path / "kill.db")
    child = subprocess.run(
        [sys.executable, "-c", KILL_IN_BATCH, path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr
    with SqliteStore(path) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert store.load("k0") == [{"seq": 0}]
        assert store.load("k1") == [{"seq": 0}]
        assert store.load("k2") == [{"seq": 0}]


@pytest.mark.clause("J6")
@pytest.mark.clause("J7")
@pytest.mark.clause("J2")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_mixed_outcomes_under_concurrency_match_the_serial_model(
    gc_store: SqliteStore, seed: int
) -> None:
    """6 threads, each owning a run, mix good appends, seq repeats and stale writes.

    Every good append commits, every repeat raises JournalOrderViolation, every
    write with a stale lease (also aimed at other threads' runs) raises
    LeaseHeldError; each journal is exactly its owner's good appends in order.
    """
    import random

    store = gc_store
    group = store._door
    assert group.grouping
    leases = [store.acquire(f"m{n}", f"w{n}") for n in range(6)]
    ops_before, batches_before = group.operations, group.batches
    expected: dict[int, list[dict[str, int]]] = {n: [] for n in range(6)}
    wrong: list[str] = []

    def worker(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        seq = 0
        for step in range(80):
            roll = rng.random()
            if roll < 0.6:
                store.append(f"m{n}", {"seq": seq, "w": n, "s": step}, leases[n])
                expected[n].append({"seq": seq, "w": n, "s": step})
                seq += 1
            elif roll < 0.8 and seq > 0:
                try:
                    store.append(
                        f"m{n}", {"seq": seq - 1, "w": n, "s": step}, leases[n]
                    )
                    wrong.append(f"repeat of seq {seq - 1} in m{n} was accepted")
                except JournalOrderViolation:
                    pass  # the expected refusal: the seq is not above the tail
            else:
                target = rng.randrange(6)
                stale = Lease(f"m{target}", f"w{n}", leases[target].epoch + 1 + n)
                try:
                    store.append(f"m{target}", {"seq": 10**6 + step, "stale": n}, stale)
                    wrong.append(f"stale append to m{target} was accepted")
                except LeaseHeldError:
                    pass  # the expected refusal: a never-issued epoch

    calls = Calls()
    for n in range(6):
        calls.start(f"m{n}", partial(worker, n))
    calls.join()
    assert all(kind == "ok" for kind, _ in calls.outcomes.values()), calls.outcomes
    assert wrong == []
    for n in range(6):
        assert store.load(f"m{n}") == expected[n]
    assert group.operations - ops_before == 6 * 80  # every step was one write
    assert group.batches - batches_before <= 6 * 80


@pytest.mark.clause("Q6")
def test_batch_mates_return_before_the_leader_hands_over(
    gc_store: SqliteStore,
) -> None:
    """Once COMMIT returns, the leader wakes its batch-mates before its own steps.

    A leader thread carries three batch-mates, parked before its COMMIT; the
    test then holds the door's queue mutex, which the leader needs to hand
    over. The three mates still return, their writes committed, while the
    leader waits for the mutex; then the leader returns too.
    """
    store = gc_store
    door = store._door
    leases = {run: store.acquire(run, "w") for run in ("lead", "a", "b", "c")}
    fence_parked, fence_release = threading.Event(), threading.Event()
    commit_parked, commit_release = threading.Event(), threading.Event()
    seen: set[str] = set()

    def pause(operation: str, point: str) -> None:
        if threading.current_thread().name != "leader" or point in seen:
            return
        seen.add(point)
        if point == "after-fence-check":
            fence_parked.set()
            assert fence_release.wait(DEADLINE_S)
        elif point == "before-commit":
            commit_parked.set()
            assert commit_release.wait(DEADLINE_S)

    leader, mates = Calls(), Calls()
    with hook(pause):
        leader.start(
            "leader", partial(store.append, "lead", {"seq": 0}, leases["lead"])
        )
        assert fence_parked.wait(DEADLINE_S)
        for count, run in enumerate(("a", "b", "c"), 1):
            mates.start(run, partial(store.append, run, {"seq": 0}, leases[run]))
            wait_until(partial(has_queued, store, count))
        fence_release.set()
        assert commit_parked.wait(DEADLINE_S)
        with door._mutex:  # the leader's hand-over waits for it
            commit_release.set()
            mates.join()
            assert leader.threads[0].is_alive()
        leader.join()
    assert mates.outcomes == {run: ("ok", None) for run in ("a", "b", "c")}
    assert leader.outcomes == {"leader": ("ok", None)}
    with SqliteStore(store.path) as other:
        assert [other.load(run) for run in ("lead", "a", "b", "c")] == [
            [{"seq": 0}]
        ] * 4


@pytest.mark.clause("Q14")
def test_a_second_wake_of_an_operation_is_a_no_op() -> None:
    """Woken twice (by the early wake and again by the hand-over), a caller wakes once.

    The second wake neither raises nor leaves the operation's lock released
    for a later wait.
    """
    op: Operation[None] = Operation("append", None, lambda cursor: None)
    op.succeed(None)
    op.wake()
    op.wake()
    op.wait()
    assert not op._wake.acquire(blocking=False)
