"""Fork detection for store handles: a handle used in a forked child refuses, typed.

A child of ``fork`` inherits its parent's sockets, locks and worker-thread
objects, but not the threads, and anything it sends crosses answers with the
parent. ``ForkGuard`` remembers the fork generation it was created in; a
handle calls ``check`` before touching any resource, so the child refuses
with ``ForkedStoreError`` and leaves the parent's resources alone.

The generation is a counter bumped by ``os.register_at_fork`` in the child,
so a check is one integer comparison, no system call.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Final, final

from rulvar_store.errors import ForkedStoreError

__all__ = ["ForkGuard", "fork_generation", "holding"]

_generation = 0


def _bump_generation() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):  # absent on Windows, which has no fork
    os.register_at_fork(after_in_child=_bump_generation)


def fork_generation() -> int:
    """Return how many forks lie between this process and the first import."""
    return _generation


@final
class ForkGuard:
    """Remembers the process a handle was opened in; ``check`` refuses in any other."""

    __slots__ = ("_generation", "_label")

    def __init__(self, label: str) -> None:
        self._generation: Final = _generation
        self._label: Final = label

    @property
    def forked(self) -> bool:
        """Whether this process is a forked child of the one the handle was opened in."""
        return _generation != self._generation

    def check(self, operation: str) -> None:
        """Return quietly in the opening process.

        Raises:
            ForkedStoreError: in a forked child; nothing of the parent's was touched.
        """
        if _generation != self._generation:
            raise ForkedStoreError(
                f"{self._label} {operation}: this handle was opened before a fork; "
                "open a new store in the child process",
                operation,
            )


@contextmanager
def holding(
    guard: ForkGuard, lock: AbstractContextManager[object], operation: str
) -> Iterator[None]:
    """Hold ``lock`` for ``operation``, refusing first in a forked child.

    The fork is checked BEFORE the lock is taken: a lock another thread held
    at the moment of the fork is never released in the child, so a check
    behind it would hang instead of refusing.
    """
    guard.check(operation)
    with lock:
        yield
