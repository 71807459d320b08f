"""The generic asyncio adapter: any sync store served to coroutines, one hop per call.

A backend without a native async opener is served by this adapter. Each SPI
call runs WHOLE as ONE job on a worker thread: the sync store opens, commits
or rolls back its own transaction inside that job, so no transaction is ever
split across awaits and the event loop never runs store I/O.

Cancellation: the hop is shielded. A caller cancelled while its call runs
waits for that call to end (it is bounded like every sync call: busy
timeouts, connect and statement bounds), then gets ``CancelledError``. The
write has then either landed whole or not at all, nothing is left open, and
whether it landed is unknown to the caller (docs/guides/asyncio.md).

Bounds: a handle has at most ``DEFAULT_WORKERS`` worker threads
(``HopThreads``: one queue put per call, no executor future); more concurrent
calls queue for a worker, so a flood of coroutines cannot create unbounded
threads. Errors are the sync store's own typed errors, unchanged. Failpoint
hooks and other context variables follow the caller: each job runs in a copy
of the awaiting task's context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import cache, partial
from typing import Any, Final, TypeVar, cast

from rulvar_store._async_closing import AsyncClosing, finish_uncancelled
from rulvar_store._async_protocols import (
    AsyncJournalStore,
    AsyncOpenedStore,
    AsyncTranscriptStore,
)
from rulvar_store._batch import BatchTranscriptStore, BlobBatch
from rulvar_store._capabilities import (
    has_batch_put,
    has_fenced_writes,
    has_get_under,
    has_incremental_read,
    has_last_ref,
    has_meta_lookup,
)
from rulvar_store._fork import ForkGuard
from rulvar_store._get_under import GetUnderTranscriptStore
from rulvar_store._hop_threads import HopThreads
from rulvar_store._incremental import IncrementalReadStore, JournalTail
from rulvar_store._last_ref import LastRefTranscriptStore
from rulvar_store._location_records import OpenedStore
from rulvar_store._protocols import (
    JournalStore,
    LeasableStore,
    MetaLookupStore,
    TranscriptStore,
)
from rulvar_store._records import BlobInput, JournalEntry, Lease, RunFilter, RunMeta
from rulvar_store._urls import StoreUrl
from rulvar_store.errors import StoreClosedError

__all__ = ["DEFAULT_WORKERS", "adapt_opened", "open_adapted"]

DEFAULT_WORKERS: Final = 8
"""Worker threads per adapted handle: enough for group commit to batch 8 writers."""

T = TypeVar("T")


class _Hop:
    """The worker threads, fork guard and closed state one handle and its twin share."""

    def __init__(self, label: str, workers: int) -> None:
        self.label = label
        self.guard = ForkGuard(label)
        self.closed = False
        self._threads = HopThreads(f"rulvar-{label}", workers)

    def refuse_if_unusable(self, operation: str) -> None:
        self.guard.check(operation)
        if self.closed:
            raise self._closed_error(operation)

    def _closed_error(self, operation: str) -> StoreClosedError:
        return StoreClosedError(
            f"{self.label} {operation}: the store is closed", operation
        )

    async def run(self, operation: str, call: Callable[..., T], *args: Any) -> T:
        """Run ``call(*args)`` whole on a worker thread in the caller's context."""
        self.refuse_if_unusable(operation)
        future = self._threads.call(asyncio.get_running_loop(), partial(call, *args))
        if future is None:  # closed from another thread since the check above
            raise self._closed_error(operation)
        return await finish_uncancelled(future)

    async def close(self, close_store: Callable[[], None]) -> None:
        """Refuse new calls, let running ones end, then close the sync store. Idempotent.

        In a forked child nothing is touched: the threads and the store's
        resources belong to the parent.
        """
        if self.closed:
            return
        self.closed = True
        if self.guard.forked:
            return
        threads = self._threads

        def shut_down_then_close() -> None:
            threads.stop()
            threads.join()  # running and queued calls end first
            close_store()

        await finish_uncancelled(
            asyncio.get_running_loop().run_in_executor(None, shut_down_then_close)
        )


class _AsyncJournal(AsyncClosing):
    """The always-present journal calls of an adapted store."""

    async_api: Final = True

    def __init__(
        self, store: JournalStore, hop: _Hop, close: Callable[[], None]
    ) -> None:
        self.sync_store: Final = store
        self.fenced_writes: Final[bool] = has_fenced_writes(store)
        ttl: int | None = getattr(store, "lease_ttl_ms", None)
        if ttl is not None:  # L9: the ttl the store was opened with, when it says
            self.lease_ttl_ms: int = ttl
        self._hop = hop
        self._close = close

    def __repr__(self) -> str:
        return f"<async adapter of {self.sync_store!r}>"

    async def aclose(self) -> None:
        """Close the handle and its twin once running calls end. Idempotent."""
        await self._hop.close(self._close)

    def stats(self) -> dict[str, Any]:
        """The adapted store's counters (its ``stats()``); empty for a store without."""
        stats = getattr(self.sync_store, "stats", None)
        return {} if stats is None else dict(stats())

    async def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        await self._hop.run("append", self.sync_store.append, run_id, entry, lease)

    async def load(self, run_id: str) -> list[JournalEntry]:
        return await self._hop.run("load", self.sync_store.load, run_id)

    async def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        await self._hop.run("put_meta", self.sync_store.put_meta, meta, lease)

    async def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return await self._hop.run("list_runs", self.sync_store.list_runs, run_filter)

    async def delete(self, run_id: str, lease: Lease | None = None) -> None:
        await self._hop.run("delete", self.sync_store.delete, run_id, lease)


class _AsyncMetaLookup(_AsyncJournal):
    async def get_meta(self, run_id: str) -> RunMeta | None:
        store = cast(MetaLookupStore, self.sync_store)
        return await self._hop.run("get_meta", store.get_meta, run_id)


class _AsyncLeases(_AsyncJournal):
    async def acquire(self, run_id: str, owner: str) -> Lease:
        store = cast(LeasableStore, self.sync_store)
        return await self._hop.run("acquire", store.acquire, run_id, owner)

    async def renew(self, lease: Lease) -> None:
        store = cast(LeasableStore, self.sync_store)
        await self._hop.run("renew", store.renew, lease)

    async def release(self, lease: Lease) -> None:
        store = cast(LeasableStore, self.sync_store)
        await self._hop.run("release", store.release, lease)


class _AsyncIncremental(_AsyncJournal):
    async def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        store = cast(IncrementalReadStore, self.sync_store)
        return await self._hop.run("load_since", store.load_since, run_id, cursor)


@cache
def _journal_class(meta: bool, leases: bool, incremental: bool) -> type[_AsyncJournal]:
    """The adapter class offering exactly the optional calls the sync store offers.

    Optional abilities are detected by method presence (``has_meta_lookup``,
    ``isinstance(..., AsyncLeasableStore)``), so the adapter must not offer a
    call its store lacks.
    """
    chosen = [
        mixin
        for wanted, mixin in (
            (meta, _AsyncMetaLookup),
            (leases, _AsyncLeases),
            (incremental, _AsyncIncremental),
        )
        if wanted
    ]
    if not chosen:
        return _AsyncJournal
    name = "AsyncAdapted" + "".join(m.__name__.removeprefix("_Async") for m in chosen)
    return type(name, tuple(chosen), {})


class AsyncTranscriptAdapter(AsyncClosing):
    """An adapted blob store; it shares its journal's worker threads and closed state."""

    async_api: Final = True

    def __init__(self, store: TranscriptStore, hop: _Hop) -> None:
        self.sync_store: Final = store
        self.fenced_writes: Final[bool] = has_fenced_writes(store)
        self._hop = hop

    def __repr__(self) -> str:
        return f"<async adapter of {self.sync_store!r}>"

    async def aclose(self) -> None:
        """A no-op: the twin lives and dies with its journal handle (T6)."""

    def stats(self) -> dict[str, Any]:
        """The adapted store's counters (its ``stats()``); empty for a store without."""
        stats = getattr(self.sync_store, "stats", None)
        return {} if stats is None else dict(stats())

    async def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        await self._hop.run("put", self.sync_store.put, ref, blob, lease)

    async def get(self, ref: str) -> bytes | None:
        return await self._hop.run("get", self.sync_store.get, ref)

    async def list_refs(self, run_id: str) -> list[str]:
        return await self._hop.run("list_refs", self.sync_store.list_refs, run_id)

    async def delete(self, ref: str, lease: Lease | None = None) -> None:
        await self._hop.run("delete", self.sync_store.delete, ref, lease)


class AsyncBatchTranscriptAdapter(AsyncTranscriptAdapter):
    """An adapted blob store whose sync store offers ``put_many`` (T11)."""

    async def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        put_many = cast(BatchTranscriptStore, self.sync_store).put_many
        await self._hop.run("put_many", put_many, items, lease)


class _AsyncLastRefAdapter(AsyncTranscriptAdapter):
    """The ``last_ref`` of an adapted blob store whose sync store offers it (T12)."""

    async def last_ref(self, run_id: str, prefix: str) -> str | None:
        last_ref = cast(LastRefTranscriptStore, self.sync_store).last_ref
        return await self._hop.run("last_ref", last_ref, run_id, prefix)


class _AsyncGetUnderAdapter(AsyncTranscriptAdapter):
    """The ``get_under`` of an adapted blob store whose sync store offers it (T13)."""

    async def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        get_under = cast(GetUnderTranscriptStore, self.sync_store).get_under
        return await self._hop.run("get_under", get_under, run_id, prefix)


@cache
def _transcript_class(
    batch: bool, last_ref: bool, get_under: bool
) -> type[AsyncTranscriptAdapter]:
    """The adapter class offering exactly the optional calls the sync store offers."""
    mixins = [
        mixin
        for wanted, mixin in (
            (get_under, _AsyncGetUnderAdapter),
            (last_ref, _AsyncLastRefAdapter),
            (batch, AsyncBatchTranscriptAdapter),
        )
        if wanted
    ]
    if not mixins:
        return AsyncTranscriptAdapter
    if len(mixins) == 1:
        return mixins[0]
    name = "".join(m.__name__.strip("_") for m in mixins)
    return type(name, tuple(mixins), {})


def _transcripts(store: TranscriptStore, hop: _Hop) -> AsyncTranscriptAdapter:
    # put_many, last_ref and get_under are offered only where the sync store
    # has them: has_batch_put, has_last_ref and has_get_under are their
    # declarations, so an adapter must not claim what it cannot do.
    return _transcript_class(
        has_batch_put(store), has_last_ref(store), has_get_under(store)
    )(store, hop)


def adapt_opened(
    opened: OpenedStore, *, label: str = "store", workers: int = DEFAULT_WORKERS
) -> AsyncOpenedStore:
    """Serve an opened sync store to coroutines; ``aclose`` closes ``opened``."""
    store = opened.journal
    hop = _Hop(label, workers)
    journal_class = _journal_class(
        has_meta_lookup(store),
        isinstance(store, LeasableStore),
        has_incremental_read(store),
    )
    journal = journal_class(store, hop, opened.close)
    return AsyncOpenedStore(
        journal=cast(AsyncJournalStore, journal),
        transcripts=cast(AsyncTranscriptStore, _transcripts(opened.transcripts, hop)),
        closers=(journal.aclose,),
    )


async def open_adapted(
    open_sync: Callable[[StoreUrl], OpenedStore], url: StoreUrl
) -> AsyncOpenedStore:
    """Open ``url`` with a sync opener on a worker thread and adapt the result.

    A caller cancelled while the open runs gets ``CancelledError`` once the
    open has ended and what it opened is closed again: nothing leaks.
    """
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, open_sync, url)
    try:
        opened = await finish_uncancelled(future)
    except asyncio.CancelledError:
        if not future.cancelled() and future.exception() is None:
            await finish_uncancelled(loop.run_in_executor(None, future.result().close))
        raise
    return adapt_opened(opened, label=url.scheme)
