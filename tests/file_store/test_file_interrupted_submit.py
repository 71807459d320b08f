"""An interrupt while a file write is being handed to its helper thread (issue 21 item 13).

``run_to_completion`` runs each durable file write whole in a helper thread.
Handing it over is itself interruptible: a SIGINT can land just before or
just after the job is queued.
The caller used to raise at once while its write went on in the background,
so the storm test (``test_file_interrupts``) now and then found the temp
file's descriptor still open after its loop had ended. These tests aim the
interrupt at both sides of the queueing, deterministically.

White-box: rulvar_store._shielded
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rulvar_store import _shielded


class _InterruptedPut:
    """The helper queue, as seen by a caller hit by a KeyboardInterrupt at ``put``.

    ``after_queueing``: the interrupt lands once the job was queued and a helper
    took it, else just before queueing (nobody has it). An interrupt between
    the two (queued, not yet taken) withdraws the job: the ``_Job`` tests below.
    """

    def __init__(self, queue: Any, after_queueing: bool) -> None:
        self.queue = queue
        self.after_queueing = after_queueing

    def put(self, job: _shielded._Job[Any]) -> None:
        if self.after_queueing:
            self.queue.put(job)
            while not job.claim:  # a helper has taken it before the interrupt lands
                time.sleep(0.001)
        raise KeyboardInterrupt


@pytest.fixture
def interrupted_submit(
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[bool], None]:
    """Make the next handovers of ``run_to_completion`` interrupted ones."""

    def install(after_queueing: bool) -> None:
        interrupted = _InterruptedPut(_shielded._queue(), after_queueing)
        monkeypatch.setattr(_shielded, "_queue", lambda: interrupted)

    return install


def _slow_write(log: list[str], started: threading.Event) -> Callable[[], Any]:
    def operation() -> str:
        started.set()
        time.sleep(0.2)  # long enough that a caller not waiting returns first
        log.append("finished")
        return "done"

    return operation


def test_an_interrupt_after_queueing_waits_for_the_write_to_finish(
    interrupted_submit: Callable[[bool], None],
) -> None:
    """X13: the caller gets its interrupt only once the queued write has finished."""
    interrupted_submit(True)
    log: list[str] = []
    started = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        _shielded.run_to_completion(_slow_write(log, started))
    assert started.is_set()
    assert log == ["finished"]


def test_an_interrupt_before_queueing_runs_nothing(
    interrupted_submit: Callable[[bool], None],
) -> None:
    """X13: a write never handed over never runs; the caller gets its interrupt at once."""
    interrupted_submit(False)
    log: list[str] = []
    started = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        _shielded.run_to_completion(_slow_write(log, started))
    time.sleep(0.3)  # what a stray helper would need to show itself
    assert not started.is_set()
    assert log == []


def test_a_withdrawn_job_is_skipped_by_the_helper_that_dequeues_it() -> None:
    """X13: a job its caller withdrew before any helper took it never runs later."""
    ran: list[bool] = []
    job = _shielded._Job(lambda: ran.append(True))
    assert job.withdrawn()
    assert (
        job.withdrawn()
    )  # asking again, as an interrupted caller does, gives the same answer
    job.run()
    assert ran == []
    assert not job.done


def test_a_job_a_helper_took_cannot_be_withdrawn() -> None:
    """X13: once a helper has claimed the job, the caller must wait for it."""
    job = _shielded._Job(lambda: "value")
    job.run()
    assert job.done
    assert job.result == "value"
    assert not job.withdrawn()
