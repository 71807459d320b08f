"""Drive an async store from the kit's threads, so every suite examines the async path.

The suites are written against the sync SPI and race real threads. The facade
gives them that SPI over an async store: one event loop runs in its own daemon
thread per process, and each sync call submits the matching coroutine there
and blocks its calling thread on the result. Many kit threads therefore have
many coroutines in flight on ONE loop at once, which is exactly what a native
async store's concurrency (group commit, a pool) must get right.

Each coroutine runs as a task in a COPY OF THE CALLING THREAD'S CONTEXT, so a
failpoint aimed at a kit thread (``_failpause``) still finds that caller's
hits when the store hits them on a worker thread.

``async_locations`` turns a backend's location factory into one whose handles
open through ``open_store_async`` (a URL location) or the generic adapter
(any other), behind the facade.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final, Generic, TypeVar, cast

from rulvar_store import (
    AsyncOpenedStore,
    Clock,
    JournalStore,
    OpenedStore,
    TranscriptStore,
    has_batch_put,
    has_fenced_writes,
    open_store_async,
)
from rulvar_store.backend import (
    LocationFactory,
    LocationOpener,
    StoreLocation,
    UrlOpener,
    adapt_opened,
    fork_generation,
    has_get_under,
    has_last_ref,
)

__all__ = [
    "AsyncFacadeOpener",
    "EventLoopThread",
    "Submitted",
    "async_locations",
    "loop_thread",
    "open_async_at",
]

T = TypeVar("T")

CALL_LIMIT_S: Final = 120.0
"""Longest a kit thread waits for one facade call (every store call is bounded far
below; this only keeps a wedged loop from hanging the certification)."""


class EventLoopThread:
    """An event loop running forever in a daemon thread; ``call`` runs a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="rulvar-kit-loop", daemon=True
        )
        self._thread.start()

    def start(self, make: Callable[[], Awaitable[T]]) -> Submitted[T]:
        """Start ``make()`` as a task in a copy of the caller's context."""
        context = contextvars.copy_context()
        submitted: Submitted[T] = Submitted(self.loop)

        def settle(task: asyncio.Task[T]) -> None:
            done = submitted.future
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        def begin() -> None:
            task = self.loop.create_task(_awaited(make), context=context)
            submitted.task = task
            task.add_done_callback(settle)

        self.loop.call_soon_threadsafe(begin)
        return submitted

    def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the loop and return its result (its exception, as raised)."""
        return self.start(make).future.result(CALL_LIMIT_S)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


class Submitted(Generic[T]):
    """A coroutine started on the loop thread: its future, and a way to cancel its task."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.task: asyncio.Task[T] | None = None
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def cancel(self) -> None:
        """Cancel the awaiting task, as ``asyncio.timeout`` or a TaskGroup would."""

        def cancel_task() -> None:
            if self.task is not None:  # set first: call_soon runs in order
                self.task.cancel()

        self._loop.call_soon_threadsafe(cancel_task)


_loops: dict[int, EventLoopThread] = {}
_loops_lock = threading.Lock()


def loop_thread() -> EventLoopThread:
    """This process's loop thread, started on first use (a forked child starts its own)."""
    generation = fork_generation()
    with _loops_lock:
        running = _loops.get(generation)
        if running is None:
            running = _loops[generation] = EventLoopThread()
        return running


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: _Facade, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.async_store, name)
        return self.loop.call(lambda: method(*args, **kwargs))

    forward.__name__ = name
    return forward


class _Facade:
    """Sync calls over one async store; methods are forwarded by name."""

    def __init__(self, async_store: object, loop: EventLoopThread) -> None:
        self.async_store = async_store
        self.loop = loop
        self.fenced_writes: Final[bool] = has_fenced_writes(async_store)
        ttl = getattr(async_store, "lease_ttl_ms", None)
        if ttl is not None:
            self.lease_ttl_ms = ttl

    def __repr__(self) -> str:
        return f"<sync facade of {self.async_store!r}>"


_JOURNAL_CALLS: Final = ("append", "load", "put_meta", "list_runs", "delete")
_OPTIONAL_CALLS: Final = ("get_meta", "acquire", "renew", "release", "load_since")
_BLOB_CALLS: Final = ("put", "get", "list_refs", "delete")
# Queued puts (Q19), offered together or not at all.
_QUEUED_CALLS: Final = ("queue_put", "await_put", "flush_queued")


@cache
def _facade_class(calls: tuple[str, ...]) -> type[_Facade]:
    """A facade class offering exactly ``calls`` (optional abilities are found by name)."""
    namespace = {name: _forwarder(name) for name in calls}
    return type("SyncFacade", (_Facade,), namespace)


def _queues_puts(blobs: object) -> bool:
    return all(callable(getattr(blobs, name, None)) for name in _QUEUED_CALLS)


def facade_opened(opened: AsyncOpenedStore, loop: EventLoopThread) -> OpenedStore:
    """Present an opened async store through the sync SPI, driven on ``loop``."""
    journal_calls = _JOURNAL_CALLS + tuple(
        name
        for name in _OPTIONAL_CALLS
        if callable(getattr(opened.journal, name, None))
    )
    journal = _facade_class(journal_calls)(opened.journal, loop)
    blob_calls = (
        _BLOB_CALLS
        + (("put_many",) if has_batch_put(opened.transcripts) else ())
        + (("last_ref",) if has_last_ref(opened.transcripts) else ())
        + (("get_under",) if has_get_under(opened.transcripts) else ())
        + (_QUEUED_CALLS if _queues_puts(opened.transcripts) else ())
    )
    blobs = _facade_class(blob_calls)(opened.transcripts, loop)
    return OpenedStore(
        journal=cast(JournalStore, journal),
        transcripts=cast(TranscriptStore, blobs),
        closers=(lambda: loop.call(opened.aclose),),
    )


async def open_async_at(
    opener: LocationOpener, ttl_ms: int | None, now: Clock | None, fail_fast: bool
) -> AsyncOpenedStore:
    """Open a location's handle through the async API (the registry for a URL location)."""
    if isinstance(opener, UrlOpener):
        return await open_store_async(
            opener.url, **opener.options_for(ttl_ms, now, fail_fast)
        )
    opened = await asyncio.to_thread(opener, ttl_ms, now, fail_fast)
    return adapt_opened(opened, label="kit")


@dataclass(frozen=True)
class AsyncFacadeOpener:
    """Opens a location's handle through the async API, behind the facade; picklable."""

    inner: LocationOpener

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        loop = loop_thread()
        opened = loop.call(lambda: open_async_at(self.inner, ttl_ms, now, fail_fast))
        return facade_opened(opened, loop)


def async_locations(locations: LocationFactory) -> LocationFactory:
    """The same fresh locations, each opened through the async API behind the facade."""

    def make() -> StoreLocation:
        location = locations()
        return replace(
            location,
            name=f"{location.name} (async)",
            opener=AsyncFacadeOpener(location.opener),
        )

    return make
