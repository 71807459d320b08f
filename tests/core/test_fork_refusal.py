"""The in-process and file stores refuse a handle used in a forked child (Y4).

A child of ``os.fork`` holds a private copy of a memory domain (its writes
would never reach the parent) and of every lock (one another thread held at
the fork is never released there). So each handle opened before a fork
refuses every call in the child with ``ForkedStoreError``, checked before its
lock is taken, and the parent's handle goes on as if nothing happened. Real
forks: the child reports through its exit code only.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from rulvar_store import (
    FileTranscriptStore,
    ForkedStoreError,
    JsonlFileStore,
    MemoryStore,
    MemoryTranscriptStore,
)
from rulvar_store.backend import Failpoint, set_failpoint_hook

pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)

REFUSED, OTHER_ERROR, NO_ERROR, HUNG = 0, 2, 1, -1
CHILD_LIMIT_S: Final = 20.0  # a bound only: a refusing child exits at once


def _in_child(action: Callable[[], object]) -> int:
    """Fork; the child runs ``action``; return how it ended (``REFUSED`` ...)."""
    pid = os.fork()
    if pid == 0:  # the child: nothing but the exit code crosses back
        code = NO_ERROR
        try:
            action()
        except ForkedStoreError:
            code = REFUSED
        except BaseException:
            code = OTHER_ERROR
        os._exit(code)
    deadline = time.monotonic() + CHILD_LIMIT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)  # hung on a lock the fork left held
    os.waitpid(pid, 0)
    return HUNG


@pytest.mark.clause("Y4")
def test_a_memory_store_and_its_twin_refuse_in_a_forked_child() -> None:
    store = MemoryStore()
    lease = store.acquire("r", "parent")
    store.append("r", {"seq": 1}, lease)
    blobs = store.transcripts()
    calls: list[Callable[[], object]] = [
        lambda: store.append("r", {"seq": 2}, lease),
        lambda: store.load("r"),
        lambda: store.load_since("r"),
        lambda: store.put_meta({"runId": "r", "status": "done"}, lease),
        lambda: store.get_meta("r"),
        lambda: store.list_runs(),
        lambda: store.delete("r", lease),
        lambda: store.acquire("s", "child"),
        lambda: store.renew(lease),
        lambda: store.release(lease),
        lambda: store.transcripts(),
        lambda: blobs.put("r/x", b"x", lease),
        lambda: blobs.get("r/x"),
        lambda: blobs.list_refs("r"),
        lambda: blobs.delete("r/x", lease),
    ]
    assert [_in_child(call) for call in calls] == [REFUSED] * len(calls)
    store.append("r", {"seq": 2}, lease)  # the parent's handle goes on
    assert store.load("r") == [{"seq": 1}, {"seq": 2}]
    second = MemoryStore.sharing(store)
    assert second.load("r") == [{"seq": 1}, {"seq": 2}]


@pytest.mark.clause("Y4")
def test_a_memory_transcript_store_refuses_in_a_forked_child() -> None:
    blobs = MemoryTranscriptStore()
    blobs.put("r/x", b"x")
    calls: list[Callable[[], object]] = [
        lambda: blobs.put("r/y", b"y"),
        lambda: blobs.get("r/x"),
        lambda: blobs.list_refs("r"),
        lambda: blobs.delete("r/x"),
    ]
    assert [_in_child(call) for call in calls] == [REFUSED] * len(calls)
    assert blobs.list_refs("r") == ["r/x"]


@pytest.mark.clause("Y4")
def test_file_stores_refuse_in_a_forked_child_and_leave_the_files_alone(
    tmp_path: Path,
) -> None:
    journal = JsonlFileStore(tmp_path)
    blobs = FileTranscriptStore(tmp_path)
    journal.append("r", {"seq": 1})
    journal.put_meta({"runId": "r", "status": "running"})
    blobs.put("r/x", b"x")
    calls: list[Callable[[], object]] = [
        lambda: journal.append("r", {"seq": 2}),
        lambda: journal.load("r"),
        lambda: journal.load_since("r"),
        lambda: journal.put_meta({"runId": "r", "status": "done"}),
        lambda: journal.get_meta("r"),
        lambda: journal.list_runs(),
        lambda: journal.delete("r"),
        lambda: blobs.put("r/y", b"y"),
        lambda: blobs.get("r/x"),
        lambda: blobs.list_refs("r"),
        lambda: blobs.delete("r/x"),
    ]
    assert [_in_child(call) for call in calls] == [REFUSED] * len(calls)
    journal.append("r", {"seq": 2})
    with JsonlFileStore(tmp_path) as other:
        assert other.load("r") == [{"seq": 1}, {"seq": 2}]
        assert other.get_meta("r") == {"runId": "r", "status": "running"}
    assert blobs.list_refs("r") == ["r/x"]


@pytest.mark.clause("Y4")
def test_a_child_forked_while_a_thread_holds_the_lock_refuses_instead_of_hanging(
    tmp_path: Path,
) -> None:
    """The fork is checked before the handle's lock, which the fork left held.

    A parent thread stands inside an append (paused at a failpoint, holding the
    store's lock) when the process forks; in the child that lock is never
    released, so only a check made before taking it can answer.
    """
    journal = JsonlFileStore(tmp_path)
    journal.append("r", {"seq": 1})
    reached, go = threading.Event(), threading.Event()
    writer_thread: list[int] = []

    def pause(operation: str, point: Failpoint) -> None:
        if threading.get_ident() in writer_thread and point == "after-write":
            reached.set()
            go.wait(CHILD_LIMIT_S)

    def write() -> None:
        writer_thread.append(threading.get_ident())
        journal.append("r", {"seq": 2})

    previous = set_failpoint_hook(pause)
    writer = threading.Thread(target=write)
    try:
        writer.start()
        assert reached.wait(CHILD_LIMIT_S)
        outcome = _in_child(lambda: journal.load("r"))
    finally:
        go.set()
        writer.join(CHILD_LIMIT_S)
        set_failpoint_hook(previous)
    assert outcome == REFUSED
    assert journal.load("r") == [{"seq": 1}, {"seq": 2}]
