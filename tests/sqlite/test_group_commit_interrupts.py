"""Interrupted callers of group commit (Q14): their interrupt is theirs alone.

A caller interrupted while queued behind a leader, or while leading a batch,
by a real SIGINT (``KeyboardInterrupt`` in a child's main thread) or by an
asynchronous exception (``PyThreadState_SetAsyncExc``), gets that interrupt;
its batch-mates keep their own outcomes (their writes are rolled back with the
interrupted transaction and run again under the next leader), no queue entry
stays behind and the writers that come later never hang.
"""

from __future__ import annotations

import ctypes
import json
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

import pytest

from rulvar_store import Lease
from rulvar_store.backend import set_failpoint_hook
from rulvar_store_sqlite import SqliteStore

DEADLINE_S = 20.0


class Interrupted(BaseException):
    """An asynchronous exception, as a thread-stopping library would raise it."""


def raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Raise ``exc_type`` in ``thread`` at its next bytecode (CPython's async exception)."""
    assert thread.ident is not None
    hit = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type)
    )
    assert hit == 1, "the thread was not found"


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
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def queued_is(store: SqliteStore, count: int) -> bool:
    return store._door.queued() == count


class Caller(threading.Thread):
    """One store call in a thread of its own; keeps its result or exception."""

    def __init__(self, name: str, call: Callable[[], Any]) -> None:
        super().__init__(name=name, daemon=True)  # a hung caller must not hang pytest
        self._call = call
        self.outcome: tuple[str, Any] | None = None

    def run(self) -> None:
        try:
            self.outcome = ("ok", self._call())
        except BaseException as exc:  # the outcome is what is checked
            self.outcome = ("error", exc)

    def finish(self) -> tuple[str, Any]:
        self.join(DEADLINE_S)
        assert not self.is_alive(), f"{self.name} never returned"
        assert self.outcome is not None
        return self.outcome


def later_writers_finish(store: SqliteStore, leases: dict[str, Lease]) -> None:
    """Three writers after the interrupt: each returns, in its own batch or a shared one."""
    callers = [
        Caller(f"later-{run}", partial(store.append, run, {"seq": 10}, leases[run]))
        for run in ("a", "b", "c")
    ]
    for caller in callers:
        caller.start()
    assert [caller.finish() for caller in callers] == [("ok", None)] * 3


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "irq.db"), ttl_ms=600_000) as opened:
        yield opened


def _leases(store: SqliteStore, *runs: str) -> dict[str, Lease]:
    return {run: store.acquire(run, "w") for run in runs}


@contextmanager
def parked_leader(
    store: SqliteStore, lease: Lease, at_commit: Callable[[], None] | None = None
) -> Iterator[tuple[Caller, threading.Event]]:
    """A leader appending to ``lease``'s run, parked after its fence check until set.

    ``at_commit`` runs in the leader's thread at its batch's first
    ``before-commit``, once the callers queued meanwhile have joined the batch.
    """
    parked = threading.Event()
    release = threading.Event()
    seen: set[str] = set()

    def pause(operation: str, point: str) -> None:
        # The leader also runs its batch-mates' steps: act once per point.
        if threading.current_thread().name != "leader" or point in seen:
            return
        seen.add(point)
        if point == "after-fence-check":
            parked.set()
            assert release.wait(DEADLINE_S)
        elif point == "before-commit" and at_commit is not None:
            at_commit()

    with hook(pause):
        leader = Caller("leader", lambda: store.append(lease.run_id, {"seq": 0}, lease))
        leader.start()
        assert parked.wait(DEADLINE_S)
        try:
            yield leader, release
        finally:
            release.set()


@pytest.mark.clause("Q14")
def test_an_async_exception_in_a_queued_caller_leaves_no_entry_behind(
    store: SqliteStore,
) -> None:
    """The queued caller gets its exception at once; the leader and later writers go on."""
    leases = _leases(store, "lead", "gone", "a", "b", "c")
    door = store._door
    with parked_leader(store, leases["lead"]) as (leader, _release):
        queued = Caller(
            "queued", lambda: store.append("gone", {"seq": 0}, leases["gone"])
        )
        queued.start()
        wait_until(lambda: door.queued() == 1)
        raise_in(queued, Interrupted)
        kind, error = queued.finish()  # while the leader is still parked
        assert kind == "error"
        assert isinstance(error, Interrupted)
        assert door.queued() == 0
    assert leader.finish() == ("ok", None)
    later_writers_finish(store, leases)
    assert store.load("gone") == []
    assert store.load("lead") == [{"seq": 0}]
    assert door.queued() == 0
    assert not store._conn.in_transaction


@pytest.mark.clause("Q14")
def test_an_async_exception_in_the_leader_is_the_leaders_alone(
    store: SqliteStore,
) -> None:
    """Raised at the shared commit: the mates' writes, rolled back, run again once.

    The mates queued while the leader was parked, so they joined its batch; the
    exception reaches the leader at its first ``before-commit``.
    """
    leases = _leases(store, "lead", "m1", "m2", "a", "b", "c")
    door = store._door

    def interrupt_leader() -> None:
        raise_in(threading.current_thread(), Interrupted)

    with parked_leader(store, leases["lead"], interrupt_leader) as (leader, release):
        mates = [
            Caller(run, partial(store.append, run, {"seq": 1}, leases[run]))
            for run in ("m1", "m2")
        ]
        for count, mate in enumerate(mates, 1):
            mate.start()
            wait_until(partial(queued_is, store, count))
        release.set()
        kind, error = leader.finish()
        assert kind == "error"
        assert isinstance(error, Interrupted)
        assert [mate.finish() for mate in mates] == [("ok", None)] * 2
    assert store.load("lead") == []  # rolled back: the leader's own write is gone
    assert store.load("m1") == [{"seq": 1}]
    assert store.load("m2") == [{"seq": 1}]
    later_writers_finish(store, leases)
    assert door.queued() == 0
    assert not store._conn.in_transaction


SIGINT_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    from rulvar_store.backend import set_failpoint_hook
    from rulvar_store_sqlite import SqliteStore

    path, role = sys.argv[1], sys.argv[2]
    store = SqliteStore(path, ttl_ms=600_000)
    door = store._door
    leases = {run: store.acquire(run, "w") for run in ("lead", "main", "m1", "m2", "a", "b", "c")}
    outcomes = {}
    parked, release = threading.Event(), threading.Event()
    done = set()

    def call(name, run, seq):
        def go():
            try:
                store.append(run, {"seq": seq}, leases[run])
                outcomes[name] = "ok"
            except BaseException as exc:
                outcomes[name] = type(exc).__name__
        thread = threading.Thread(target=go, name=name, daemon=True)
        thread.start()
        return thread

    def until(condition):
        deadline = time.monotonic() + 20
        while not condition():
            if time.monotonic() > deadline:
                print(json.dumps({"hung": True}), flush=True)
                os._exit(3)
            time.sleep(0.001)

    def pause(operation, point):
        name = threading.current_thread().name
        if name == "leader" and point == "after-fence-check":
            parked.set()
            release.wait(20)
        # The leading main thread also runs its mates' steps: act once each.
        if name == "MainThread" and role == "leader" and point not in done:
            done.add(point)
            if point == "after-fence-check":
                # The two mates queue meanwhile and join this transaction.
                for n, mate in enumerate(("m1", "m2"), 1):
                    threads.append(call(mate, mate, 1))
                    until(lambda n=n: door.queued() == n)
            elif point == "before-commit":
                signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, mid-batch

    set_failpoint_hook(pause)
    threads = []
    if role == "queued":
        threads.append(call("leader", "lead", 0))
        parked.wait(20)
        def interrupt_main():
            until(lambda: door.queued() == 1)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt_main, daemon=True).start()
    try:
        store.append("main", {"seq": 0}, leases["main"])
        outcomes["main"] = "ok"
    except KeyboardInterrupt:
        outcomes["main"] = "KeyboardInterrupt"
    outcomes["queued_after_interrupt"] = door.queued()
    release.set()
    for thread in threads:
        thread.join(20)
    set_failpoint_hook(None)
    later = [call(f"later-{run}", run, 10) for run in ("a", "b", "c")]
    for thread in later:
        thread.join(20)
    outcomes["hung"] = any(t.is_alive() for t in threads + later)
    outcomes["journals"] = {run: store.load(run) for run in ("lead", "main", "m1", "m2")}
    outcomes["queued_at_end"] = door.queued()
    print(json.dumps(outcomes), flush=True)
    os._exit(0)  # a hung caller thread must not keep the child alive
    """
)


def run_child(path: Path, role: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", SIGINT_CHILD, str(path), role],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.clause("Q14")
def test_sigint_while_queued_takes_only_the_interrupted_write_away(
    tmp_path: Path,
) -> None:
    """Ctrl-C in a main thread queued behind a leader: its write never runs, nobody hangs."""
    result = run_child(tmp_path / "q.db", "queued")
    assert result["main"] == "KeyboardInterrupt"
    assert result["queued_after_interrupt"] == 0
    assert result["leader"] == "ok"
    assert not result["hung"]
    assert {name: result[f"later-{name}"] for name in "abc"} == dict.fromkeys(
        "abc", "ok"
    )
    assert result["journals"] == {"lead": [{"seq": 0}], "main": [], "m1": [], "m2": []}
    assert result["queued_at_end"] == 0


@pytest.mark.clause("Q14")
def test_sigint_in_a_leading_main_thread_is_its_own(tmp_path: Path) -> None:
    """Ctrl-C at the leader's before-commit: the mates commit under the next leader."""
    result = run_child(tmp_path / "l.db", "leader")
    assert result["main"] == "KeyboardInterrupt"
    assert (result["m1"], result["m2"]) == ("ok", "ok")
    assert not result["hung"]
    assert {name: result[f"later-{name}"] for name in "abc"} == dict.fromkeys(
        "abc", "ok"
    )
    assert result["journals"] == {
        "lead": [],
        "main": [],  # rolled back with the interrupted transaction
        "m1": [{"seq": 1}],
        "m2": [{"seq": 1}],
    }
    assert result["queued_at_end"] == 0
