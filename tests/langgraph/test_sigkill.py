"""A worker SIGKILLed inside a node: the successor resumes its checkpoints (G4).

Real processes on a real SQLite file and a real PostgreSQL schema. The child
holds the thread with a short ttl; once it is killed the parent polls for the
lease (bounded, never a timed assertion), then resumes the thread.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

import pytest

from rulvar_conformance.suites.langgraph_ownership import three_node_graph
from rulvar_langgraph import RulvarSaver
from rulvar_store import LeaseHeldError
from rulvar_store.backend import UrlOpener
from tests.langgraph._backends import SHARED

WORKER: Final = Path(__file__).with_name("sigkill_worker.py")
ROOT: Final = Path(__file__).resolve().parents[2]
TTL_MS: Final = 1_000
BOUND_S: Final = 60.0
THREAD: Final = "killed-thread"


def _wait_for(path: Path, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while not path.exists():
        assert child.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the worker never reached n2"
        time.sleep(0.02)


def _hold_when_free(saver: RulvarSaver, stack: ExitStack) -> Any:
    """Enter a hold once the dead worker's lease expires (bounded poll)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            return stack.enter_context(saver.hold(THREAD))
        except LeaseHeldError:
            assert time.monotonic() < deadline, "the dead worker's lease never expired"
            time.sleep(TTL_MS / 10_000)


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("G4")
def test_successor_resumes_a_sigkilled_workers_checkpoints(
    url_opener: UrlOpener, tmp_path: Path
) -> None:
    """Killed in n2, the worker's n1 checkpoint survives; the successor runs n2 and n3."""
    reached = tmp_path / "reached"
    spec = {
        "url": url_opener.url,
        "options": dict(url_opener.options),
        "thread": THREAD,
        "ttl_ms": TTL_MS,
        "reached": str(reached),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spec)], env=env, stderr=sink
        )
    try:
        _wait_for(reached, child, log)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    with RulvarSaver.from_url(
        url_opener.url, owner="successor", **{**url_opener.options, "ttl_ms": TTL_MS}
    ) as saver:
        config = {"configurable": {"thread_id": THREAD}}
        journaled = saver.get_tuple(config)  # type: ignore[arg-type]  # a plain config
        assert journaled is not None
        assert journaled.checkpoint["channel_values"]["trail"] == ["n1:worker-killed"]
        with ExitStack() as stack:
            held = _hold_when_free(saver, stack)
            graph = three_node_graph(saver, "successor")
            result = graph.invoke(None, held, durability="sync")
        assert result["trail"] == ["n1:worker-killed", "n2:successor", "n3:successor"]
