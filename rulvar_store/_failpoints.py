"""Named failpoints inside store transactions, for kill-point and fault tests.

Backends call ``hit(operation, point)`` at fixed points of their one transaction
path: ``after-begin``, ``after-fence-check``, ``before-commit``, ``after-commit``.
PostgreSQL adds ``after-send``: the COMMIT has been sent and its reply not yet
read, so the server alone decides the outcome. The file stores, which have no
transactions, mark the steps of their durable writes instead: ``mid-write``
(part of the write is on disk: half a journal line, or the meta file removed
but not yet the journal), ``after-write`` (data written, not yet fsynced),
``after-fsync`` (a temp file is durable, not yet renamed into place),
``after-rename`` (the new file is in place) and ``after-commit`` (the
operation is complete). With no hook installed a hit costs one global read. A
test or the kill-point driver installs a hook (for example one that SIGKILLs
the process when a given operation reaches a given point).

A hook is process-global, so tools aim it at one caller by ``caller_identity``:
the mark ``mark_caller`` set in the caller's context, else its thread. Context
variables follow a call across threads wherever the store hops with a copy of
the caller's context (``asyncio.to_thread``, the async adapter, the kit's async
facade), so aiming works on the asyncio path, where the failpoint is hit on a
worker thread, not on the caller's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, Literal

__all__ = [
    "FAILPOINTS",
    "Failpoint",
    "FailpointHook",
    "armed",
    "caller_identity",
    "hit",
    "mark_caller",
    "marked_caller",
    "set_failpoint_hook",
]

Failpoint = Literal[
    "after-begin",
    "after-fence-check",
    "before-commit",
    "after-send",
    "after-commit",
    "mid-write",
    "after-write",
    "after-fsync",
    "after-rename",
]
FAILPOINTS: Final[tuple[Failpoint, ...]] = (
    "after-begin",
    "after-fence-check",
    "before-commit",
    "after-send",
    "after-commit",
    "mid-write",
    "after-write",
    "after-fsync",
    "after-rename",
)

FailpointHook = Callable[[str, Failpoint], None]

_hook: FailpointHook | None = None


def set_failpoint_hook(hook: FailpointHook | None) -> FailpointHook | None:
    """Install ``hook`` for every store in this process; return the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def armed() -> bool:
    """Whether a hook is installed (stores split a write only then, to expose a point)."""
    return _hook is not None


def hit(operation: str, point: Failpoint) -> None:
    """Run the installed hook, if any, for ``operation`` reaching ``point``."""
    hook = _hook
    if hook is not None:
        hook(operation, point)


_caller_mark: ContextVar[object | None] = ContextVar(
    "rulvar_failpoint_caller", default=None
)


def caller_identity() -> object:
    """Who is calling, for aiming a hook: the context's mark, else the thread id."""
    mark = _caller_mark.get()
    return mark if mark is not None else threading.get_ident()


def mark_caller() -> object:
    """Give the current context a fresh mark and return it (copies carry it along)."""
    mark = object()
    _caller_mark.set(mark)
    return mark


@contextmanager
def marked_caller() -> Iterator[object]:
    """``mark_caller`` for the duration of the block, then the previous mark again."""
    mark = object()
    token = _caller_mark.set(mark)
    try:
        yield mark
    finally:
        _caller_mark.reset(token)
