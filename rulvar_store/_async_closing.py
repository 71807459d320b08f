"""What every async store handle shares: ``async with``/``aclose`` and the shielded hop wait.

One home for the pieces the generic adapter and each backend's native async
store need alike, exported to backend authors by ``rulvar_store.backend``:

- ``AsyncClosing``: leaving ``async with`` awaits ``aclose()``, which each
  handle defines;
- ``finish_uncancelled``: await a hop (a thread job or a task) so that a
  cancelled caller is resumed only once the call is over (Y2);
- ``wait_out``: wait for a future to end whatever cancels the waiter, the
  second half of ``finish_uncancelled`` for callers that handle the cancel
  themselves.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["AsyncClosing", "finish_uncancelled", "wait_out"]

T = TypeVar("T")


class AsyncClosing:
    """Base of async handles: ``async with handle:`` closes it with ``await aclose()``."""

    __slots__ = ()  # lets slotted (dataclass) handles derive from it

    async def aclose(self) -> None:
        """Release what the handle holds; each handle says what, and is idempotent."""
        # Abstract: every subclass overrides it (no ABCMeta, which slotted
        # dataclass handles and the async protocols would have to share).
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def wait_out(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancels the waiter meanwhile."""
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            continue  # a second cancel: the call still has to end first
    if not future.cancelled():
        future.exception()  # retrieved: the caller gets CancelledError instead


async def finish_uncancelled(future: asyncio.Future[T]) -> T:
    """Await ``future``; if the caller is cancelled, let it finish first, then re-raise.

    The caller's ``CancelledError`` therefore always means "the call is over,
    its outcome unknown to you", never "the call is still running".
    """
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await wait_out(future)
        raise
