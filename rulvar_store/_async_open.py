"""``open_store_async``: the registry's door for asyncio callers.

A backend with a native async opener (``Backend.open_async``) is opened
through it; any other is opened by its sync opener on a worker thread and
served by the generic adapter (``_async_adapter``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, final

import pluggy

from rulvar_store._async_adapter import open_adapted
from rulvar_store._async_protocols import AsyncOpenedStore
from rulvar_store._plugins import resolve_backend
from rulvar_store._urls import parse_store_url

__all__ = ["AsyncStoreOpening", "open_store_async"]


@final
class AsyncStoreOpening:
    """An open in waiting: ``await`` it, or enter it with ``async with``.

    ``opened = await opening`` hands the ``AsyncOpenedStore`` over (the caller
    then owns ``await opened.aclose()``); ``async with opening as opened:``
    closes it on exit. Nothing is opened until one of the two happens.
    """

    __slots__ = ("_open", "_opened")

    def __init__(self, open_: Callable[[], Awaitable[AsyncOpenedStore]]) -> None:
        self._open = open_
        self._opened: AsyncOpenedStore | None = None

    def __await__(self) -> Generator[Any, None, AsyncOpenedStore]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncOpenedStore:
        self._opened = await self._open()
        return self._opened

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.aclose()


def open_store_async(
    url: str,
    *,
    manager: pluggy.PluginManager | None = None,
    **options: Any,
) -> AsyncStoreOpening:
    """Open the async journal and transcript stores that ``url`` names.

    Mirrors ``open_store``: the same URLs and options, e.g.
    ``async with open_store_async("sqlite:///runs.db", ttl_ms=30_000) as opened:``.

    Raises (when awaited or entered):
        ConfigError: malformed URL, unknown scheme, missing extra or a bad option.
    """

    async def open_() -> AsyncOpenedStore:
        parsed = parse_store_url(url, options)
        backend = resolve_backend(parsed, manager)
        if backend.open_async is not None:
            return await backend.open_async(parsed)
        return await open_adapted(backend.open, parsed)

    return AsyncStoreOpening(open_)
