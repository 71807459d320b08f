"""A cancelled caller never splits an adapted call; a forked child refuses, typed."""

from __future__ import annotations

import asyncio
import os
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_store import (
    ForkedStoreError,
    open_store,
    open_store_async,
)
from rulvar_store.backend import Failpoint, set_failpoint_hook


class _Gate:
    """A failpoint hook that parks one operation at one point until opened."""

    def __init__(self, operation: str, point: Failpoint) -> None:
        self.operation, self.point = operation, point
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, operation: str, point: Failpoint) -> None:
        if (operation, point) == (self.operation, self.point):
            self.reached.set()
            assert self.release.wait(30), "the test never opened the gate"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'runs.db'}"
    set_failpoint_hook(None)


@pytest.mark.parametrize("point", ["after-begin", "before-commit", "after-commit"])
def test_a_cancelled_append_finishes_whole_before_the_caller_sees_the_cancel(
    sqlite_url: str, point: Failpoint
) -> None:
    """The hop is shielded: the write lands whole, then CancelledError reaches the caller."""
    gate = _Gate("append", point)

    async def scenario() -> None:
        async with open_store_async(sqlite_url) as opened:
            set_failpoint_hook(gate)
            task = asyncio.create_task(opened.journal.append("run-a", {"seq": 1}))
            await asyncio.to_thread(gate.reached.wait, 30)
            task.cancel()
            for _ in range(5):
                await asyncio.sleep(0)
            # Parked inside its transaction, the call is not over, so neither is the task.
            assert not task.done()
            gate.release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            set_failpoint_hook(None)
            # Nothing was left open: a second handle writes at once, the first still works.
            with open_store(sqlite_url) as second:
                second.journal.append("run-b", {"seq": 1})
                assert [e["seq"] for e in second.journal.load("run-a")] == [1]
            await opened.journal.append("run-a", {"seq": 2})

    asyncio.run(scenario())


def test_a_forked_child_refuses_the_parents_async_handle(tmp_path: Path) -> None:
    """Fork detection: typed refusal in the child, the parent's handle untouched."""

    async def use(opened_journal: object) -> str:
        try:
            await opened_journal.load("run-a")  # type: ignore[attr-defined]  # any journal
        except ForkedStoreError as exc:
            return type(exc).__name__
        return "no error"

    async def scenario() -> None:
        async with open_store_async(f"sqlite:///{tmp_path / 'runs.db'}") as opened:
            await opened.journal.append("run-a", {"seq": 1})
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report and leave without running any cleanup
                try:
                    outcome = asyncio.run(use(opened.journal))
                    asyncio.run(opened.aclose())  # touches nothing of the parent's
                except BaseException as exc:  # reported to the parent
                    outcome = repr(exc)
                os.write(write_end, pickle.dumps(outcome))
                os._exit(0)
            os.close(write_end)
            with os.fdopen(read_end, "rb") as reader:
                outcome = pickle.loads(reader.read())
            os.waitpid(pid, 0)
            assert outcome == "ForkedStoreError"
            assert len(await opened.journal.load("run-a")) == 1

    asyncio.run(scenario())
