"""Every check under a deadline: a store that hangs fails a row instead of freezing a terminal.

``run_with_deadline`` runs a check's body in a daemon thread and waits for it at
most ``timeout_s``. A body still running then is reported as
``CheckTimedOut`` ("did not finish in N s") with the stacks of every other
thread, so the reader sees where the store is stuck (a group-commit leader that
never hands on, a lock never released). The stuck thread is left behind: it is a
daemon, so it cannot keep the process alive, and later checks use fresh
locations. ``stuck_threads`` tells a caller that one was left, so a command line
can exit without waiting for threads that will never finish.

A whole run is bounded too (K10), by ``RunBudget``: once one check has hung, the
store is known to hang, so every later check gets ``AFTER_HANG_TIMEOUT_S`` at
most instead of the full per-check deadline (a store whose group-commit leader
never hands on would otherwise cost the full deadline per check, hours over
``--suite all``); and past the run's own limit no further check starts, each
failing as not started. An honest store never hangs, so neither bound touches it.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rulvar_conformance.harness.kit import ConformanceFailure

__all__ = [
    "AFTER_HANG_TIMEOUT_S",
    "DEFAULT_CHECK_TIMEOUT_S",
    "DEFAULT_RUN_TIMEOUT_S",
    "CheckTimedOut",
    "RunBudget",
    "RunSpent",
    "run_with_deadline",
    "stuck_threads",
    "thread_dump",
]

DEFAULT_CHECK_TIMEOUT_S: Final = 180.0
"""A few times the slowest check's usual time on a loaded 2-core machine (a
kill-point or race check takes up to about 30 s there); ``--check-timeout``
changes it."""

DEFAULT_RUN_TIMEOUT_S: Final = 3600.0
"""The longest one kit run may take (K10): several times ``--suite all`` on a
loaded 2-core machine; ``--run-timeout`` changes it."""

AFTER_HANG_TIMEOUT_S: Final = 30.0
"""Each check's deadline once a check of the run hung: the slowest honest check's
usual time on a loaded 2-core machine. The run has already failed then."""

_DUMP_FRAMES: Final = 12
"""Innermost frames shown per thread: where it waits, and what called that."""

_stuck: list[threading.Thread] = []


class CheckTimedOut(ConformanceFailure):
    """``store-conformance <id>: did not finish in N s`` and the stuck threads' stacks."""

    def __init__(self, check_id: str, timeout_s: float, dump: str) -> None:
        super().__init__(
            check_id,
            f"did not finish in {timeout_s:g} s (the store hung, or the deadline is "
            f"too short for this machine: --check-timeout); threads at the deadline:\n"
            f"{dump}",
        )
        self.timeout_s = timeout_s


class RunSpent(ConformanceFailure):
    """``store-conformance <id>: not started``: the run's time limit was spent (K10)."""

    def __init__(self, check_id: str, budget: RunBudget) -> None:
        hung = (
            f"; {budget.hung} earlier {'check' if budget.hung == 1 else 'checks'} "
            "did not finish"
            if budget.hung
            else ""
        )
        super().__init__(
            check_id,
            f"not started: the run's limit of {budget.run_timeout_s:g} s was spent"
            f"{hung} (K10; --run-timeout)",
        )


@dataclass
class RunBudget:
    """The deadlines of one run's checks: bounded each, and bounded together (K10).

    ``deadline_for`` gives the next check's deadline: the per-check one, cut to
    ``after_hang_s`` once a check hung and to what is left of the run's limit.
    ``RunSpent`` when nothing is left.
    """

    check_timeout_s: float = 180.0
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S
    after_hang_s: float = AFTER_HANG_TIMEOUT_S
    hung: int = 0
    started: float = field(default_factory=time.monotonic)

    def deadline_for(self, check_id: str) -> float:
        """Seconds the next check may take.

        Raises:
            RunSpent: the run's limit is spent; the check must not start.
        """
        left = self.started + self.run_timeout_s - time.monotonic()
        if left <= 0:
            raise RunSpent(check_id, self)
        each = self.check_timeout_s
        if self.hung:
            each = min(each, self.after_hang_s)
        return min(each, left)

    def run(self, check_id: str, body: Callable[[], None]) -> None:
        """``run_with_deadline`` under this budget; a hang tightens later deadlines."""
        try:
            run_with_deadline(check_id, body, self.deadline_for(check_id))
        except CheckTimedOut:
            self.hung += 1
            raise


def thread_dump(skip: threading.Thread | None = None) -> str:
    """The innermost frames of every live thread but ``skip``, the hung one first."""
    frames = sys._current_frames()
    threads = sorted(
        (t for t in threading.enumerate() if t is not skip and t.ident in frames),
        key=lambda t: not t.name.startswith("check "),
    )
    parts = []
    for thread in threads:
        assert thread.ident is not None  # filtered above: it has a frame
        stack = traceback.format_stack(frames[thread.ident])[-_DUMP_FRAMES:]
        parts.append(f"--- thread {thread.name!r}\n" + "".join(stack).rstrip())
    return "\n".join(parts)


def run_with_deadline(
    check_id: str, body: Callable[[], None], timeout_s: float
) -> None:
    """Run ``body``; re-raise what it raised, or ``CheckTimedOut`` past ``timeout_s``.

    Raises:
        CheckTimedOut: ``body`` was still running after ``timeout_s`` seconds.
        Exception: whatever ``body`` raised, unchanged.
    """
    failure: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"check {check_id}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        _stuck.append(thread)
        raise CheckTimedOut(
            check_id, timeout_s, thread_dump(threading.current_thread())
        )
    if failure:
        raise failure[0]


def stuck_threads() -> list[threading.Thread]:
    """Checks' threads still running after their deadline (never joined)."""
    return [thread for thread in _stuck if thread.is_alive()]
