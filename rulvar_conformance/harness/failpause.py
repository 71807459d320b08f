"""Failpoint tools for race checks: record where a store stops, pause one thread there.

A store that supports the failpoint contract calls
``rulvar_store.backend.hit(operation, point)`` at fixed moments of its write
path (see ``rulvar_conformance.suites.forced_races`` for the contract). The hook is
process-global, so every tool here acts only on the ONE caller it was aimed at,
matched by ``caller_identity`` (a context mark that follows the call onto worker
threads on the asyncio path, else the thread); hits of other callers (the
competing handle) pass through.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, Generic, TypeVar

from rulvar_conformance.harness.kit import Outcome, attempt, require
from rulvar_store.backend import (
    Failpoint,
    FailpointHook,
    caller_identity,
    mark_caller,
    marked_caller,
    set_failpoint_hook,
)

__all__ = [
    "PAUSE_LIMIT_S",
    "Background",
    "FailpointPause",
    "Hit",
    "fast_switching",
    "hits_of",
    "installed",
]

T = TypeVar("T")

Hit = tuple[str, Failpoint]
"""One failpoint reached: ``(operation, point)``."""

PAUSE_LIMIT_S: Final = 20.0
"""Longest a paused thread waits for the check to let it go (a failed check lets go
at once; the bound only keeps a crashed check from wedging the session)."""


@contextmanager
def installed(hook: FailpointHook) -> Iterator[None]:
    """Install ``hook`` for the duration of the block, then restore the previous one."""
    previous = set_failpoint_hook(hook)
    try:
        yield
    finally:
        set_failpoint_hook(previous)


@contextmanager
def fast_switching(interval_s: float = 1e-5) -> Iterator[None]:
    """Make the interpreter switch threads far more often for the block.

    A check-then-act window inside one Python process is only a few bytecodes
    wide; with the default 5 ms switch interval a racing thread almost never lands
    in it. A 10 us interval makes the races real-thread tests depend on likely.
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def hits_of(call: Callable[[], object]) -> tuple[list[Hit], Outcome[object]]:
    """Run ``call`` as this caller with a recording hook; return its hits and outcome."""
    seen: list[Hit] = []
    with marked_caller() as me:

        def record(operation: str, point: Failpoint) -> None:
            if caller_identity() is me:
                seen.append((operation, point))

        with installed(record):
            outcome = attempt(call)
    return seen, outcome


class FailpointPause:
    """Pause the aimed thread at its ``index``-th failpoint hit (0-based).

    ``aim()`` is called by the thread to pause (first thing it does); ``reached``
    is set once it stands at the failpoint; ``release()`` lets it go. Every hit of
    the aimed thread is recorded in ``seen``.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.reached = threading.Event()
        self._go = threading.Event()
        self._caller: object | None = None
        self.seen: list[Hit] = []

    def aim(self) -> None:
        """Make the caller (this thread's context and its copies) the one to pause."""
        self._caller = mark_caller()

    def hook(self, operation: str, point: Failpoint) -> None:
        if self._caller is None or caller_identity() is not self._caller:
            return
        self.seen.append((operation, point))
        if len(self.seen) - 1 == self.index:
            self.reached.set()
            self._go.wait(PAUSE_LIMIT_S)

    def release(self) -> None:
        """Let the paused thread go on (idempotent)."""
        self._go.set()

    @property
    def where(self) -> str:
        """The hit the thread paused at, for messages."""
        if len(self.seen) > self.index:
            operation, point = self.seen[self.index]
            return f"{operation} at {point} (hit {self.index + 1})"
        return f"hit {self.index + 1}"


class Background(Generic[T]):
    """One call on a daemon thread; ``outcome`` once it has finished."""

    def __init__(
        self, call: Callable[[], T], before: Callable[[], None] | None = None
    ) -> None:
        self._call = call
        self._before = before
        self._outcome: Outcome[T] | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self._before is not None:
            self._before()
        self._outcome = attempt(self._call)

    def start(self) -> Background[T]:
        self._thread.start()
        return self

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; return whether the call has finished."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive() and self._outcome is not None

    @property
    def outcome(self) -> Outcome[T]:
        """The finished call's outcome (a still-running call is a check failure)."""
        outcome = self._outcome
        require(outcome is not None, "a background store call never finished")
        assert outcome is not None  # narrowed for mypy; require raised otherwise
        return outcome
