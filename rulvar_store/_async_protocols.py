"""The store SPI for asyncio callers: the sync protocols as coroutines (CONTRACT 9).

Every method has the name, arguments, records, errors and argument rules of its
sync twin in ``_protocols`` and ``_incremental``; only ``async def`` differs.
Each store also closes with ``await store.aclose()`` or ``async with``.

A ``runtime_checkable`` protocol checks method names, not whether they are
coroutines (a sync ``MemoryStore`` passes ``isinstance(..., AsyncJournalStore)``),
so an async store declares the class attribute ``async_api = True`` and callers
read it only through ``is_async_store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from rulvar_store._async_closing import AsyncClosing
from rulvar_store._incremental import JournalTail
from rulvar_store._records import BlobInput, JournalEntry, Lease, RunFilter, RunMeta

__all__ = [
    "AsyncIncrementalReadStore",
    "AsyncJournalStore",
    "AsyncLeasableStore",
    "AsyncMetaLookupStore",
    "AsyncOpenedStore",
    "AsyncTranscriptStore",
    "is_async_store",
]


def is_async_store(store: object) -> bool:
    """Return whether ``store`` declares the asyncio SPI (the marker ``async_api is True``)."""
    return getattr(store, "async_api", None) is True


@runtime_checkable
class _AsyncClosing(Protocol):
    async def aclose(self) -> None:
        """End this handle; later calls raise ``StoreClosedError``. Idempotent."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class AsyncJournalStore(_AsyncClosing, Protocol):
    """Per-run append-only journals plus one metadata record per run, awaited."""

    async def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append ``entry`` to the run's journal atomically (J1-J3, J6, J7)."""
        ...

    async def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order; ``[]`` for an unknown run (J5)."""
        ...

    async def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the whole record of ``meta["runId"]`` (M2)."""
        ...

    async def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return the metas matching ``run_filter`` (M4)."""
        ...

    async def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove the run's entries, meta and lease row; keep its epoch (M6, L5)."""
        ...


@runtime_checkable
class AsyncMetaLookupStore(AsyncJournalStore, Protocol):
    """An async journal store with a point lookup of one run's meta (M5)."""

    async def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` when it has none."""
        ...


@runtime_checkable
class AsyncLeasableStore(AsyncJournalStore, Protocol):
    """An async journal store granting exclusive, expiring, epoch-fenced leases (L1-L10)."""

    async def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with an epoch above every earlier one (L1-L3)."""
        ...

    async def renew(self, lease: Lease) -> None:
        """Extend a live lease by the ttl (L6, L8)."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give a live lease up; its epoch can never write again (L6)."""
        ...


@runtime_checkable
class AsyncIncrementalReadStore(AsyncJournalStore, Protocol):
    """An async journal store that also returns only the entries after a cursor."""

    async def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` and the next cursor."""
        ...


@runtime_checkable
class AsyncTranscriptStore(_AsyncClosing, Protocol):
    """Opaque blobs keyed by ``<runId>/<rest>`` refs (T1-T5), awaited."""

    async def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store ``blob`` under ``ref``, overwriting in place (T1)."""
        ...

    async def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` for a missing ref (T2)."""
        ...

    async def list_refs(self, run_id: str) -> list[str]:
        """Return the sorted refs that start with ``run_id + "/"`` (T4)."""
        ...

    async def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; a missing ref is a no-op (T2)."""
        ...


@dataclass(frozen=True, slots=True)
class AsyncOpenedStore(AsyncClosing):
    """An async journal store and the async transcript store that belongs with it.

    ``aclose`` (or leaving ``async with``) runs ``closers`` in order, once each.
    """

    journal: AsyncJournalStore
    transcripts: AsyncTranscriptStore
    closers: Sequence[Callable[[], Awaitable[None]]] = ()

    async def aclose(self) -> None:
        """Close what the opener opened, transcripts first (the twin shares the journal)."""
        for close in self.closers:
            await close()
