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
interrupt and the next call never races a write still in flight. An
interrupt that hits before a helper thread has taken the job withdraws it:
the operation never runs, and the caller gets the interrupt at once. The
operation runs in a copy of the caller's ``contextvars`` context, so failpoint
hooks aimed at the caller still find their hits.

Who runs a job is settled by ``dict.setdefault`` on the job's claim: one
atomic step under the GIL that gives every later call the same winner, so a
caller interrupted in the middle of asking simply asks again. Handing the job
over is one ``SimpleQueue.put``, a single C call, but the interrupt can land
just before or just after it: the claim tells the caller whether a helper has
the job (wait) or none ever will (leave).

The helpers are not a ``ThreadPoolExecutor``: its ``submit`` runs Python-level
locking in the caller (an idle-thread semaphore built on a ``Condition``), and
a KeyboardInterrupt landing inside it left that condition's lock held for good;
every helper then hung as it finished its next job, and so did the process at
exit (seen under the SIGINT storm of ``test_file_interrupts``). Here the caller
touches only the queue, and the helpers are started with ``_thread``, whose
start waits on nothing an interrupt could break.
"""

from __future__ import annotations

import _thread
import atexit
import contextvars
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, Final, Generic, TypeVar

from rulvar_store._fork import fork_generation

__all__ = ["run_to_completion"]

T = TypeVar("T")

# File operations of all stores of the process at once; each takes a few ms.
_WORKERS: Final = 4
# How often a waiting caller looks at its job again (a finished job wakes it at once).
_WAIT_SLICE_S: Final = 0.05


class _Helpers:
    """Helper threads serving jobs from one queue, and a way to let them finish."""

    def __init__(self, count: int) -> None:
        self.queue: SimpleQueue[_Job[Any] | None] = SimpleQueue()
        self.generation = fork_generation()
        self._exited: list[_thread.LockType] = []
        for _ in range(count):
            exited = _thread.allocate_lock()
            exited.acquire()
            self._exited.append(exited)
            _thread.start_new_thread(self._serve, (exited,))

    def _serve(self, exited: _thread.LockType) -> None:
        try:
            while (job := self.queue.get()) is not None:
                job.run()
        finally:
            exited.release()

    def stop(self) -> None:
        """Let the helpers finish the jobs already queued, then end them.

        Run at interpreter exit: the helpers are not threads ``threading``
        joins, and a queued write must not be cut off by finalization.
        """
        for _ in self._exited:
            self.queue.put(None)
        for exited in self._exited:
            exited.acquire()


_lock = threading.Lock()
_helpers: _Helpers | None = None


def _queue() -> SimpleQueue[_Job[Any] | None]:
    """The process's helper queue (a forked child makes its own: threads do not fork)."""
    global _helpers
    helpers = _helpers
    if helpers is None or helpers.generation != fork_generation():
        with _lock:
            helpers = _helpers
            if helpers is None or helpers.generation != fork_generation():
                helpers = _helpers = _Helpers(_WORKERS)
    return helpers.queue


@atexit.register
def _stop_helpers() -> None:
    global _helpers
    helpers, _helpers = _helpers, None  # a write from a later exit hook starts afresh
    if helpers is not None and helpers.generation == fork_generation():
        helpers.stop()


class _Job(Generic[T]):
    """One operation's outcome, and a plain lock released once it is known.

    Not a ``Future``: an interrupt inside ``Condition.wait`` can leave the
    condition's lock released twice (``RuntimeError: cannot release
    un-acquired lock``); a timed ``Lock.acquire`` has no such state.
    """

    __slots__ = (
        "claim",
        "context",
        "done",
        "error",
        "finished",
        "operation",
        "result",
    )

    def __init__(self, operation: Callable[[], T]) -> None:
        self.operation = operation
        self.context = contextvars.copy_context()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.done = False
        self.finished = threading.Lock()
        self.finished.acquire()
        # _HELPER or _CALLER, set once by whichever side claims the job first.
        self.claim: dict[str, str] = {}

    def withdrawn(self) -> bool:
        """Claim the job for the caller: True if no helper thread took it (it never will)."""
        return self.claim.setdefault(_WHO, _CALLER) == _CALLER

    def run(self) -> None:
        if self.claim.setdefault(_WHO, _HELPER) != _HELPER:
            return  # withdrawn by its interrupted caller, who is gone
        try:
            self.result = self.context.run(self.operation)
        except BaseException as exc:  # handed to the caller, whatever it is
            self.error = exc
        finally:
            self.done = True
            self.finished.release()


_WHO: Final = "by"
_CALLER: Final = "caller"
_HELPER: Final = "helper"


def run_to_completion(operation: Callable[[], T]) -> T:
    """Return ``operation()``, run whole in a helper thread; see the module docstring.

    Raises:
        BaseException: what ``operation`` raised; or the interrupt that hit the
            caller, once the operation has finished or was withdrawn unstarted.
    """
    job = _Job(operation)
    interrupt: BaseException | None = None
    try:
        _queue().put(job)
    except BaseException as exc:  # perhaps after the job was queued: the claim says
        interrupt = exc
    while True:
        try:
            if interrupt is not None and job.withdrawn():
                break  # the operation never ran and never will
            if job.done:
                break
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
