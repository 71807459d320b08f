"""Opening asyncio stores for the async saver.

Until ``rulvar_store.open_store_async`` lands (the asyncio SPI), this serves any
backend by running each WHOLE store call as one hop to a worker thread, shielded
from cancellation so a cancelled caller never splits a store transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from rulvar_store import OpenedStore, open_store

__all__ = ["ThreadHop", "async_stores", "open_async_stores"]


class ThreadHop:
    """Awaitable twins of a sync store's methods; plain attributes pass through."""

    def __init__(self, store: object) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute):
            return attribute

        async def hop(*args: Any) -> Any:
            return await asyncio.shield(asyncio.to_thread(attribute, *args))

        return hop


def async_stores(opened: OpenedStore) -> tuple[Any, Any]:
    """The opened store's journal and blob twin with awaitable methods."""
    return ThreadHop(opened.journal), ThreadHop(opened.transcripts)


@asynccontextmanager
async def open_async_stores(url: str, **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """Yield ``(journal, transcripts)`` with async methods; close the store at exit."""
    opened = await asyncio.to_thread(open_store, url, **options)
    try:
        yield async_stores(opened)
    finally:
        await asyncio.to_thread(opened.close)
