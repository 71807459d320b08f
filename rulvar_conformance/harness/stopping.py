"""Stop ONE caller at its first hit of a failpoint, while the check acts around it.

``StopAt(points)`` is a failpoint hook (install it with ``failpause.installed``)
aimed by ``aim()``, called first thing in the caller's thread or task; the
caller waits at its first hit of any of ``points`` until ``go`` is set.
``reached_or_done`` waits until the caller stands there, or has finished
without ever reaching one (a store without failpoints), so a check can say it
did not run at once instead of waiting out a bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any, Final

from rulvar_conformance.harness.failpause import PAUSE_LIMIT_S, Background
from rulvar_store.backend import Failpoint, caller_identity, mark_caller

__all__ = ["REACH_LIMIT_S", "StopAt", "reached_or_done"]

REACH_LIMIT_S: Final = 10.0


class StopAt:
    """A failpoint hook: the aimed caller waits at its first hit of ``points``."""

    def __init__(self, points: Iterable[Failpoint]) -> None:
        self.points = frozenset(points)
        self.mark: object = None
        self.reached = threading.Event()
        self.go = threading.Event()
        self.where: str | None = None

    def aim(self) -> None:
        """Make the caller (this thread's context and its copies) the one to stop."""
        self.mark = mark_caller()

    def __call__(self, operation: str, point: Failpoint) -> None:
        if (
            point in self.points
            and self.mark is not None
            and caller_identity() is self.mark
            and not self.reached.is_set()
        ):
            self.where = f"{operation} {point}"
            self.reached.set()
            self.go.wait(PAUSE_LIMIT_S)


def reached_or_done(stop: StopAt, call: Background[Any]) -> bool:
    """Wait until ``call`` stands at the failpoint (True) or ended without (False)."""
    ends = time.monotonic() + REACH_LIMIT_S
    while not stop.reached.wait(0.01):
        if call.done or time.monotonic() > ends:
            return stop.reached.is_set()
    return True
