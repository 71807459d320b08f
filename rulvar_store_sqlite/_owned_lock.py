"""A re-entrant lock that knows whether the calling thread holds it.

The group committer must tell a call made while the store's lock is already held
(a nested write, run inline) from a fresh one (queued for the next batch).
``threading.RLock`` answers only through ``_is_owned``, a private CPython method,
so the owner and depth are tracked here instead.
"""

from __future__ import annotations

import threading
from typing import final

__all__ = ["OwnedRLock"]


@final
class OwnedRLock:
    """``threading.RLock`` plus ``held_here()``; used as a context manager."""

    __slots__ = ("_depth", "_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Written only by the thread holding ``_lock``; a reader on another thread
        # can see a stale value, but never its own ident, so held_here() is exact.
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        """Take the lock (re-entrant for its holder)."""
        self._lock.acquire()
        self._owner = threading.get_ident()
        self._depth += 1

    def release(self) -> None:
        """Give back one level; the last level clears the owner before releasing."""
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
        self._lock.release()

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def __enter__(self) -> OwnedRLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
