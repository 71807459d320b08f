"""Broken asyncio SQLite stores for the loop-health suite (Y6-Y8).

Each is the real ``AsyncSqliteStore`` with one plausible bug, opened by an
``AsyncOpener`` the suite takes in place of the kit's: a read run inline on the
loop thread, a close that answers queued writes done, and (a patch of the group
commit's wake-up, applied by the self-test) a batch that wakes every caller on
the loop of its first one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from rulvar_store import AsyncOpenedStore, JournalEntry, JournalTail
from rulvar_store.backend import StoreLocation
from rulvar_store_sqlite import AsyncSqliteStore, SqliteStore, _group_commit
from rulvar_store_sqlite._transaction import Operation
from tests.conformance.selftests._broken_durability import CloseAnswersQueuedDone

__all__ = [
    "CountCursorSince",
    "InlineReadBehindWrite",
    "native_opener",
    "one_loop_wake",
]

TTL_MS = 30_000


class InlineReadBehindWrite:
    """``load`` runs the sync store's read on the loop thread ("it is only a read").

    It waits there for the store's lock while a write holds it: the loop stalls.
    Every other call is the honest store's.
    """

    def __init__(self, inner: AsyncSqliteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def load(self, run_id: str) -> list[JournalEntry]:
        return self._inner.sync_store.load(run_id)


class CountCursorSince:
    """``load_since`` done in the async handle over ``load``, its cursor a count.

    ("The async twin needs no SQL of its own: the tail is what ``load`` returns
    past the entries already seen.") A run deleted and written again with more
    entries than the cursor counted answers the new journal's tail as new,
    without ``restarted``. Every other call is the honest store's.
    """

    def __init__(self, inner: AsyncSqliteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        seen = 0 if cursor is None else int(cursor.rpartition(":")[2])
        entries = await self._inner.load(run_id)
        return JournalTail(entries[seen:], f"count:{len(entries)}", False)


def _async_over(sync_type: type[SqliteStore], path: str) -> AsyncSqliteStore:
    """An ``AsyncSqliteStore`` whose sync store (and door) is ``sync_type``."""
    store = AsyncSqliteStore.__new__(AsyncSqliteStore)
    sync = sync_type(path, ttl_ms=TTL_MS)
    object.__setattr__(store, "sync_store", sync)
    object.__setattr__(store, "_door", sync._door)
    object.__setattr__(store, "_twin", None)
    return store


def native_opener(
    broken: str | None = None,
) -> Callable[[StoreLocation], Any]:
    """An ``AsyncOpener`` of the native async store at a SQLite location's path.

    ``broken``: ``"inline-read"``, ``"close-answers-done"`` or
    ``"count-cursor"``; ``None``: honest.
    """

    async def open_at(location: StoreLocation) -> AsyncOpenedStore:
        path = location.name
        if broken == "close-answers-done":
            store = await asyncio.to_thread(_async_over, CloseAnswersQueuedDone, path)
        else:
            store = await AsyncSqliteStore.open(path, ttl_ms=TTL_MS)
        journal: Any = store
        if broken == "inline-read":
            journal = InlineReadBehindWrite(store)
        elif broken == "count-cursor":
            journal = CountCursorSince(store)
        return AsyncOpenedStore(journal, store.transcripts(), (store.aclose,))

    return open_at


def one_loop_wake(ops: list[Operation[Any]], own: Operation[Any] | None = None) -> None:
    """``_wake_decided`` with the bug: every coroutine woken on the FIRST one's loop.

    ("one hop per batch is enough"): a caller of another loop has its future set
    from a foreign thread, which its loop is never told of.
    """
    first: asyncio.AbstractEventLoop | None = None
    resumed: list[Operation[Any]] = []
    for op in ops:
        if not op.done or op.signalled or op is own:
            continue
        if op.resume is None:
            op.wake()
            continue
        first = first or op.resume[0]
        resumed.append(op)
    if first is not None:
        with suppress(RuntimeError):
            first.call_soon_threadsafe(_group_commit._resolve, resumed)
        for op in resumed:
            op.signalled = True
