"""Threads an async store hops to: one queue, up to N threads, nothing per call but a put.

A coroutine's store call costs two thread hops (to a worker, and back to the
caller's loop), so each hop is kept to the bare primitive: a job is handed over
with one ``SimpleQueue.put`` (a C-level lock release) instead of an executor's
future, work item and semaphore per call, and a thread does nothing between
jobs but wait on that queue, so the GIL it holds after a job is released right
after the job has resumed its caller. ``AsyncSqliteStore``'s door uses one
thread (it leads the batches); the generic adapter uses ``DEFAULT_WORKERS``.

Threads start as calls need them, up to the bound: a job posted while every
thread is busy waits for the first to finish. After ``stop`` no job is taken
(``post`` returns False); those posted before still run, then the threads end.
They are daemon threads, so a store its owner never closed cannot hold up
interpreter exit (a dropped pool also tells its threads to end); a backend's
atomic commit covers a process that ends while a job runs, as it covers a kill.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar, final

__all__ = ["HopThreads"]

T = TypeVar("T")

Job = Callable[[], object]


@final
class _Shared:
    """What the threads share with their pool (never the pool itself, so it can die)."""

    __slots__ = ("backlog", "idle", "jobs", "lock")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        # Threads waiting for a job nobody claimed yet, and jobs queued while
        # none was: a thread that finishes takes a backlog job before it
        # counts as idle, so a post never counts on a thread that is busy.
        self.idle = 0
        self.backlog = 0


@final
class HopThreads:
    """Up to ``workers`` threads running posted jobs in order, started on demand."""

    __slots__ = ("__weakref__", "_name", "_shared", "_started", "_stopped", "_workers")

    def __init__(self, name: str, workers: int = 1) -> None:
        self._name = name
        self._workers = workers
        self._shared = _Shared()
        self._started: list[threading.Thread] = []
        self._stopped = False
        # A dropped, never-stopped pool must not leave its threads waiting.
        weakref.finalize(self, _end_threads, self._shared.jobs, self._started)

    def post(self, job: Job) -> bool:
        """Queue ``job`` for a thread; False once stopped (it will never run)."""
        shared = self._shared
        with shared.lock:
            if self._stopped:
                return False
            if shared.idle:
                shared.idle -= 1
            elif len(self._started) < self._workers:
                thread = threading.Thread(
                    target=_serve, args=(shared,), name=self._name, daemon=True
                )
                thread.start()
                self._started.append(thread)
            else:
                shared.backlog += 1
            shared.jobs.put(job)
        return True

    def call(
        self, loop: asyncio.AbstractEventLoop, call: Callable[[], T]
    ) -> asyncio.Future[T] | None:
        """Run ``call`` on a thread in the caller's context; its outcome on ``loop``.

        None once stopped. The future is never cancelled from the thread's
        side; a caller that stops waiting must shield it (the call still ends).
        """
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def job() -> None:
            try:
                result = context.run(call)
            except BaseException as exc:  # the caller's to see, whatever it is
                _settle(loop, future.set_exception, future, exc)
            else:
                _settle(loop, future.set_result, future, result)

        return future if self.post(job) else None

    def stop(self) -> None:
        """Take no more jobs; the threads end after those already queued. Idempotent."""
        with self._shared.lock:
            if self._stopped:
                return
            self._stopped = True
            _end_threads(self._shared.jobs, self._started)

    def join(self) -> None:
        """Wait for the threads to end (after ``stop``; never from one of them)."""
        for thread in self._started:
            thread.join()


def _end_threads(
    jobs: queue.SimpleQueue[Job | None], started: list[threading.Thread]
) -> None:
    for _ in started:
        jobs.put(None)  # after every job already queued: FIFO


def _serve(shared: _Shared) -> None:
    jobs, lock = shared.jobs, shared.lock
    while (job := jobs.get()) is not None:
        # A job settles its callers itself (every operation it carries is
        # decided, every call's future set) before anything escapes it; the
        # thread must outlive whatever does.
        with suppress(BaseException):
            job()
        del job  # drop the finished job's references before waiting again
        with lock:
            if shared.backlog:
                shared.backlog -= 1  # the next queued job is this thread's
            else:
                shared.idle += 1


def _settle(
    loop: asyncio.AbstractEventLoop,
    setter: Callable[[Any], None],
    future: asyncio.Future[Any],
    value: object,
) -> None:
    """Hand ``value`` to ``future`` on its loop; a closed loop has nobody waiting."""

    def settle() -> None:
        if not future.done():
            setter(value)

    with suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)
