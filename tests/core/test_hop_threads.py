"""HopThreads, the threads async stores hop to: bounded, on demand, ordered, stoppable."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading

import pytest

from rulvar_store.backend import HopThreads

WAIT_S = 20.0


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_threads_start_as_calls_need_them_and_never_beyond_the_bound() -> None:
    pool = HopThreads("hop-test-bound", workers=3)
    release = threading.Event()
    running: list[int] = []
    lock = threading.Lock()
    three_in = threading.Barrier(4)

    def job() -> None:
        with lock:
            running.append(threading.get_ident())
            first_three = len(running) <= 3
        if first_three:
            three_in.wait(WAIT_S)
        assert release.wait(WAIT_S)

    for _ in range(6):
        assert pool.post(job)
    three_in.wait(WAIT_S)  # three jobs run at once: the other three wait
    assert len(running) == 3
    assert len(_threads_named("hop-test-bound")) == 3
    release.set()
    pool.stop()
    pool.join()
    assert len(running) == 6
    assert len(set(running)) == 3


def test_an_idle_thread_takes_the_next_call_instead_of_a_new_one() -> None:
    pool = HopThreads("hop-test-idle", workers=4)
    seen: list[int] = []
    for _ in range(5):
        done = threading.Event()

        def job(done: threading.Event = done) -> None:
            seen.append(threading.get_ident())
            done.set()

        pool.post(job)
        assert done.wait(WAIT_S)
    assert len(set(seen)) == 1
    pool.stop()
    pool.join()


def test_jobs_queued_behind_a_busy_thread_run_in_order_and_count_nobody_idle() -> None:
    pool = HopThreads("hop-test-order", workers=1)
    gate = threading.Event()
    order: list[str] = []

    def first() -> None:
        gate.wait(WAIT_S)
        order.append("a")

    pool.post(first)
    pool.post(lambda: order.append("b"))
    pool.post(lambda: order.append("c"))
    gate.set()
    last = threading.Event()
    pool.post(last.set)
    assert last.wait(WAIT_S)
    assert order == ["a", "b", "c"]
    assert len(_threads_named("hop-test-order")) == 1
    pool.stop()
    pool.join()


def test_stop_refuses_new_jobs_and_still_runs_the_queued_ones() -> None:
    pool = HopThreads("hop-test-stop", workers=1)
    gate = threading.Event()
    ran: list[str] = []

    def running() -> None:
        gate.wait(WAIT_S)
        ran.append("running")

    pool.post(running)
    pool.post(lambda: ran.append("queued"))
    pool.stop()
    assert not pool.post(lambda: ran.append("late"))
    gate.set()
    pool.join()
    assert ran == ["running", "queued"]
    assert _threads_named("hop-test-stop") == []


def test_a_call_returns_its_outcome_on_the_loop_in_the_callers_context() -> None:
    pool = HopThreads("hop-test-call", workers=2)
    who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")

    def fails() -> None:
        raise KeyError(who.get())

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        who.set("the caller")
        returned = pool.call(loop, who.get)
        raised = pool.call(loop, fails)
        assert returned is not None
        assert raised is not None
        assert await returned == "the caller"
        with pytest.raises(KeyError, match="the caller"):
            await raised

    asyncio.run(scenario())
    pool.stop()
    loop = asyncio.new_event_loop()
    try:
        assert pool.call(loop, who.get) is None
    finally:
        loop.close()
    pool.join()


def test_a_job_that_raises_does_not_end_its_thread() -> None:
    pool = HopThreads("hop-test-raise", workers=1)

    def boom() -> None:
        raise SystemExit("a job's exception is its own")

    pool.post(boom)
    done = threading.Event()
    pool.post(done.set)
    assert done.wait(WAIT_S)
    pool.stop()
    pool.join()


def test_a_dropped_pool_ends_its_threads() -> None:
    pool = HopThreads("hop-test-dropped", workers=2)
    done = threading.Event()
    pool.post(done.set)
    assert done.wait(WAIT_S)
    (thread,) = _threads_named("hop-test-dropped")
    del pool
    gc.collect()
    thread.join(WAIT_S)
    assert not thread.is_alive()
