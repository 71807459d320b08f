"""Interrupts wait for the end of a store call, so no call leaks a connection.

A signal handler (``KeyboardInterrupt`` from SIGINT, ``SystemExit`` from a
SIGTERM handler) raises at whatever bytecode the main thread is running. In a
PostgreSQL call that can be between ``getconn()`` and the ``try`` that hands
the connection back, or inside psycopg_pool's own hand-over (a queued client
interrupted after a connection was assigned to it): each such interrupt lost
one connection of the pool for good, and after a few hundred the pool had none.

So, while a store call runs on the main thread, the Python handlers of the
usual termination signals are swapped for one that only records the signal;
when the call ends (its connection back in the pool, its outcome settled), the
recorded signal's own handler runs, and the caller gets its interrupt there.
Every call is bounded (``call_timeout_ms``), so the delay is bounded too.
Other threads never receive signal handlers' exceptions, so they skip this.

Sections nest and overlap (asyncio tasks interleave theirs on one thread): the
handlers are swapped when the first section opens and restored when the last
closes; a signal recorded meanwhile is delivered when any section closes, in
the task that closes it, so a busy event loop cannot hold it back forever.
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Callable
from threading import get_ident
from types import FrameType
from typing import Any, Final

__all__ = ["interrupts_deferred"]

Handler = Callable[[int, FrameType | None], Any]


def _raw_signal_calls() -> tuple[Callable[[int], object], Callable[[int, Any], object]]:
    """``getsignal`` and ``signal`` without the enum conversions of ``signal``'s wrappers.

    Every store call swaps the handlers twice. Through ``signal.getsignal`` each
    lookup of a Python handler converts it to an enum member by raising and
    catching a ``ValueError``: about 14 us of a 300 us append. The C module that
    ``signal`` wraps answers the same question (an int for SIG_DFL / SIG_IGN, the
    callable otherwise) directly; where it is missing, the wrappers serve.
    """
    try:
        raw = importlib.import_module("_signal")
    except ImportError:  # pragma: no cover - interpreters without the C module
        return signal.getsignal, signal.signal
    return raw.getsignal, raw.signal


_getsignal, _setsignal = _raw_signal_calls()

_NAMES: Final = (
    "SIGINT",
    "SIGTERM",
    "SIGHUP",
    "SIGQUIT",
    "SIGUSR1",
    "SIGUSR2",
    "SIGALRM",
)
_SIGNALS: Final = tuple(
    getattr(signal, name) for name in _NAMES if hasattr(signal, name)
)


class _Deferral:
    """The main thread's swapped handlers, open sections and recorded signals."""

    def __init__(self) -> None:
        self.depth = 0
        self.saved: dict[int, Handler] = {}
        self.pending: list[tuple[int, FrameType | None]] = []
        # One bound method, installed and recognized by identity: building a
        # new one per signal per call cost more than the swap itself.
        self.recorder: Handler = self.record

    def record(self, signum: int, frame: FrameType | None) -> None:
        if all(signum != seen for seen, _ in self.pending):
            self.pending.append((signum, frame))

    def open(self) -> None:
        if self.depth == 0:
            try:
                for signum in _SIGNALS:
                    current = _getsignal(signum)
                    if callable(current):  # not SIG_DFL / SIG_IGN: a Python handler
                        self.saved[signum] = current
                        _setsignal(signum, self.recorder)
            except BaseException:
                self._restore()
                raise
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        delivered = self.pending.pop(0) if self.pending else None
        handler = self.saved.get(delivered[0]) if delivered else None
        if self.depth == 0:
            later = [signum for signum, _ in self.pending]
            self.pending.clear()
            self._restore()
            for signum in later:  # a second kind of signal in one call: sent again
                signal.raise_signal(signum)
        if delivered is not None and handler is not None:
            handler(*delivered)

    def _restore(self) -> None:
        for signum, handler in self.saved.items():
            # Someone who replaced our recorder meanwhile keeps their handler.
            if _getsignal(signum) is self.recorder:
                _setsignal(signum, handler)
        self.saved.clear()


_DEFERRAL: Final = _Deferral()


class _Section:
    """The context manager of ``interrupts_deferred``: one shared, stateless object.

    A class, not a generator (it runs around every store call). It holds no
    state of its own, so sections can nest and interleave on it; whether the
    caller is the main thread is asked on entry and again on exit, and a
    thread is the same thread at both ends.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        if get_ident() == threading.main_thread().ident:
            _DEFERRAL.open()

    def __exit__(self, *exc_info: object) -> None:
        if get_ident() == threading.main_thread().ident:
            _DEFERRAL.close()


_SECTION: Final = _Section()


def interrupts_deferred() -> _Section:
    """Hold the main thread's signal handlers until the body ends (see module)."""
    return _SECTION
