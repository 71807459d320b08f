"""The door's one worker thread: it leads asyncio callers' batches and runs their reads.

A coroutine's write costs two thread hops (to this thread, and back to the
caller's loop), so each hop is kept to the bare primitive: a job is handed
over with one ``SimpleQueue.put`` (a C-level lock release) instead of an
executor's future, work item and semaphore per call, and the thread does
nothing between jobs but wait on that queue, so the GIL it holds after a
batch is released right after it has resumed the batch's callers.

The thread starts with the first job and ends after ``stop``: jobs posted
before ``stop`` still run (a closed store fails their operations typed),
later ones are refused. It is a daemon thread, so a store its owner never
closed cannot hold up interpreter exit; SQLite's atomic commit covers a
process that ends while a batch runs, exactly as it covers a kill.
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

__all__ = ["DoorWorker"]

T = TypeVar("T")

Job = Callable[[], object]


@final
class DoorWorker:
    """One thread running posted jobs in order, started on the first post."""

    __slots__ = ("__weakref__", "_jobs", "_lock", "_name", "_stopped", "_thread")

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        # Orders post against stop: no job is queued behind the stop marker.
        self._lock = threading.Lock()
        self._stopped = False
        self._thread: threading.Thread | None = None
        # A dropped, never-closed store must not leave its thread waiting forever.
        weakref.finalize(self, self._jobs.put, None)

    def post(self, job: Job) -> bool:
        """Queue ``job`` for the thread; False once stopped (it will never run)."""
        with self._lock:
            if self._stopped:
                return False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_serve, args=(self._jobs,), name=self._name, daemon=True
                )
                self._thread.start()
            self._jobs.put(job)
        return True

    def call(
        self, loop: asyncio.AbstractEventLoop, call: Callable[[], T]
    ) -> asyncio.Future[T] | None:
        """Run ``call`` on the thread in the caller's context; its future on ``loop``.

        None once stopped. The future is never cancelled by the worker; a
        caller that stops waiting for it must shield it (it still completes).
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
        """Refuse new jobs; the thread ends after those already queued. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._thread is not None:
                self._jobs.put(None)


def _serve(jobs: queue.SimpleQueue[Job | None]) -> None:
    while (job := jobs.get()) is not None:
        # A job settles its callers itself (every operation it carries is
        # decided, every read's future set) before anything escapes it; the
        # thread must outlive whatever does.
        with suppress(BaseException):
            job()
        del job  # drop the finished job's references before waiting again


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
