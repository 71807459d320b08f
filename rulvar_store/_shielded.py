"""Run a short file operation to its end even if the calling thread is interrupted.

Python runs signal handlers (``KeyboardInterrupt``) and delivers asynchronous
exceptions between bytecodes, typically right after a system call returns: an
``fd = os.open(...)`` interrupted there loses the descriptor, and the temp
file it created is never removed (issue 21: hundreds of ``meta.json~*.tmp``
files and descriptors after a storm of SIGINTs). No ``try`` can close that
window, since the value is lost before it is stored.

``run_to_completion`` runs the operation in a helper thread instead, where no
signal handler runs and nobody aims an asynchronous exception, so its own
``try``/``finally`` always cleans up. The caller waits; an interrupt that hits
it while it waits is held until the operation has finished (succeeded or
cleaned up), then re-raised in the caller, so the caller still gets its own
interrupt and the next call never races a write still in flight. The
operation runs in a copy of the caller's ``contextvars`` context, so failpoint
hooks aimed at the caller still find their hits.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, Generic, TypeVar

from rulvar_store._fork import fork_generation

__all__ = ["run_to_completion"]

T = TypeVar("T")

# File operations of all stores of the process at once; each takes a few ms.
_WORKERS: Final = 4
# How often a waiting caller looks at its job again (a finished job wakes it at once).
_WAIT_SLICE_S: Final = 0.05

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


def _executor() -> ThreadPoolExecutor:
    """The process's helper threads (a forked child makes its own: threads do not fork)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != fork_generation():
            _pool = (
                fork_generation(),
                ThreadPoolExecutor(_WORKERS, thread_name_prefix="rulvar-file"),
            )
        return _pool[1]


class _Job(Generic[T]):
    """One operation's outcome, and a plain lock released once it is known.

    Not a ``Future``: an interrupt inside ``Condition.wait`` can leave the
    condition's lock released twice (``RuntimeError: cannot release
    un-acquired lock``); a timed ``Lock.acquire`` has no such state.
    """

    __slots__ = ("context", "done", "error", "finished", "operation", "result")

    def __init__(self, operation: Callable[[], T]) -> None:
        self.operation = operation
        self.context = contextvars.copy_context()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.done = False
        self.finished = threading.Lock()
        self.finished.acquire()

    def run(self) -> None:
        try:
            self.result = self.context.run(self.operation)
        except BaseException as exc:  # handed to the caller, whatever it is
            self.error = exc
        finally:
            self.done = True
            self.finished.release()


def run_to_completion(operation: Callable[[], T]) -> T:
    """Return ``operation()``, run whole in a helper thread; see the module docstring.

    Raises:
        BaseException: what ``operation`` raised, or, once it has finished, the
            interrupt that hit the caller while it waited.
    """
    job = _Job(operation)
    _executor().submit(job.run)
    interrupt: BaseException | None = None
    while not job.done:
        try:
            # Timed: an interrupt right after a successful acquire loses that
            # acquire, and ``done`` is read again within one slice.
            job.finished.acquire(timeout=_WAIT_SLICE_S)
        except BaseException as exc:
            interrupt = interrupt or exc  # the caller's: held until the end
    if interrupt is not None:
        raise interrupt
    if job.error is not None:
        raise job.error
    return job.result  # type: ignore[return-value]  # set by run()
