"""Every check under a deadline: a store that hangs fails a row instead of freezing a terminal.

``run_with_deadline`` runs a check's body in a daemon thread and waits for it at
most ``timeout_s``. A body still running then is reported as
``CheckTimedOut`` ("did not finish in N s") with the stacks of every other
thread, so the reader sees where the store is stuck (a group-commit leader that
never hands on, a lock never released). The stuck thread is left behind: it is a
daemon, so it cannot keep the process alive, and later checks use fresh
locations. ``stuck_threads`` tells a caller that one was left, so a command line
can exit without waiting for threads that will never finish.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Final

from rulvar_conformance.harness.kit import ConformanceFailure

__all__ = [
    "DEFAULT_CHECK_TIMEOUT_S",
    "CheckTimedOut",
    "run_with_deadline",
    "stuck_threads",
    "thread_dump",
]

DEFAULT_CHECK_TIMEOUT_S: Final = 180.0
"""A few times the slowest check's usual time on a loaded 2-core machine (a
kill-point or race check takes up to about 30 s there); ``--check-timeout``
changes it."""

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
