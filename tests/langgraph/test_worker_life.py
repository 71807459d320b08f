"""A worker's whole life with real processes: stalled, killed, taken over (L10, L11).

A 4-node graph (prep -> work -> refund -> done) on the fenced saver, SQLite and
PostgreSQL, sync and async holds. The worker is a real OS process that parks in
``work``; the test SIGSTOPs or SIGKILLs it and a successor (this process) takes
the thread over and finishes it. ``refund`` is the side effect, appended to a
log: after a takeover exactly one refund may be there, the successor's.
Every wait is bounded by a count or a time cap; no assertion is timed except
the takeover bound, which is far below the ttl the old behaviour waited out.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest
from langgraph.graph import END, START, StateGraph

from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver, ensure_owned, owned
from rulvar_langgraph._layout import run_for_thread
from rulvar_store import LeaseHeldError, LeaseLostError
from rulvar_store.backend import UrlOpener
from tests.langgraph._backends import SHARED
from tests.langgraph.life_graph import Trail, life_graph

WORKER: Final = Path(__file__).with_name("life_worker.py")
ROOT: Final = Path(__file__).resolve().parents[2]
BOUND_S: Final = 60.0
THREAD: Final = "user/42 ticket"
STALL_TTL_MS: Final = 1_000
# Long enough that a successor which waited out the ttl fails the bound below.
CRASH_TTL_MS: Final = 30_000
TAKEOVER_BOUND_S: Final = 10.0


@contextmanager
def _worker(
    url_opener: UrlOpener, tmp_path: Path, mode: str, ttl_ms: int
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    spec: dict[str, Any] = {
        "url": url_opener.url,
        "options": dict(url_opener.options),
        "thread": THREAD,
        "ttl_ms": ttl_ms,
        "mode": mode,
        "owner": "worker-a",
        "reached": str(tmp_path / "reached"),
        "go": str(tmp_path / "go"),
        "log": str(tmp_path / "side-effects.log"),
        "result": str(tmp_path / "result.json"),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spec)], env=env, stderr=sink
        )
    try:
        deadline = time.monotonic() + BOUND_S
        while not Path(spec["reached"]).exists():
            assert child.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the worker never reached work"
            time.sleep(0.01)
        yield child, spec
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
        child.wait()


def _successor(url_opener: UrlOpener, spec: dict[str, Any], ttl_ms: int) -> Any:
    options = {**url_opener.options, "ttl_ms": ttl_ms}
    return RulvarSaver.from_url(url_opener.url, owner="worker-b", **options)


def _take_over(saver: RulvarSaver, bound_s: float) -> tuple[Any, float, int]:
    """Enter a hold of the thread, polling while it is held; (hold, seconds, refusals)."""
    started = time.monotonic()
    refusals = 0
    while True:
        hold = saver.hold(THREAD)
        try:
            config = hold.__enter__()
        except LeaseHeldError:
            refusals += 1
            assert time.monotonic() - started < bound_s, "the thread was never free"
            time.sleep(0.005)
            continue
        return (hold, config), time.monotonic() - started, refusals


def _refunds(spec: dict[str, Any]) -> list[str]:
    log = Path(spec["log"])
    return log.read_text().splitlines() if log.exists() else []


def _finish(saver: RulvarSaver, spec: dict[str, Any], held: Any) -> list[str]:
    """The successor resumes the thread from its checkpoint and finishes it."""
    hold, config = held
    graph = life_graph(saver, {**spec, "owner": "worker-b", "go": None, "mode": "sync"})
    try:
        final = graph.invoke(None, config, durability="sync")
    finally:
        hold.__exit__(None, None, None)
    return list(final["trail"])


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.clause("L10")
@pytest.mark.clause("L12")
def test_a_stalled_worker_resumed_after_a_takeover_pays_nothing(
    url_opener: UrlOpener, tmp_path: Path, mode: str
) -> None:
    """L10: SIGSTOPped in ``work`` past the ttl, taken over, then SIGCONTed: the
    worker's invocation ends with LeaseLostError and its refund never runs."""
    with _worker(url_opener, tmp_path, mode, STALL_TTL_MS) as (child, spec):
        child.send_signal(signal.SIGSTOP)
        with _successor(url_opener, spec, STALL_TTL_MS) as saver:
            # A stopped holder is alive: refused, with who holds it and until when.
            with pytest.raises(LeaseHeldError) as refused:
                saver.hold(THREAD).__enter__()
            assert refused.value.holder == "worker-a"
            assert refused.value.retry_after_ms is not None
            assert 0 <= refused.value.retry_after_ms <= STALL_TTL_MS
            held, _, _ = _take_over(saver, BOUND_S)  # once the ttl ran out
            trail = _finish(saver, spec, held)
        assert "refund:worker-b" in trail
        Path(spec["go"]).touch()
        child.send_signal(signal.SIGCONT)
        child.wait(BOUND_S)
    outcome = json.loads(Path(spec["result"]).read_text())
    assert outcome["ended"] == "LeaseLostError", outcome
    assert outcome["data"]["owner"] == "worker-a"
    assert _refunds(spec) == [f"refund:{THREAD} worker-b"]


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.clause("L11")
def test_a_killed_workers_thread_is_taken_over_at_once(
    url_opener: UrlOpener, tmp_path: Path, mode: str
) -> None:
    """L11: SIGKILLed in ``work`` with a 30 s ttl, its thread is taken over far
    sooner (the holder is provably dead) and finished with one refund."""
    with (
        _worker(url_opener, tmp_path, mode, CRASH_TTL_MS) as (child, spec),
        _successor(url_opener, spec, CRASH_TTL_MS) as saver,
    ):
        with pytest.raises(LeaseHeldError):
            saver.hold(THREAD).__enter__()  # alive: refused
        child.send_signal(signal.SIGKILL)
        child.wait()
        held, waited_s, _ = _take_over(saver, TAKEOVER_BOUND_S)
        trail = _finish(saver, spec, held)
    assert waited_s < TAKEOVER_BOUND_S < CRASH_TTL_MS / 1000
    assert trail[:2] == ["prep:worker-a", "work:worker-b"]
    assert _refunds(spec) == [f"refund:{THREAD} worker-b"]


LOSS_TTL_MS: Final = 1_500


def _saver_of(url_opener: UrlOpener, owner: str) -> Any:
    options = {**url_opener.options, "ttl_ms": LOSS_TTL_MS}
    return RulvarSaver.from_url(url_opener.url, owner=owner, **options)


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("L13")
def test_a_sync_hold_that_lost_its_lease_refuses_its_writes_before_any_io(
    url_opener: UrlOpener, tmp_path: Path
) -> None:
    """L13: once the thread is deleted under a sync hold, owned() turns false,
    ensure_owned raises LeaseLostError and the hold's next write raises it
    before reaching the store (the store's own refusal is a plain
    LeaseHeldError, and nothing new is stored)."""
    spec = {"owner": "worker-a", "log": str(tmp_path / "log"), "mode": "sync"}
    with _saver_of(url_opener, "worker-a") as saver:
        graph = life_graph(saver, spec)
        with saver.hold(THREAD) as config:
            graph.invoke({"trail": []}, config, durability="sync")
            assert owned(config)
            # An operator's delete: the lease row goes, the checkpoints stay.
            saver.journal.delete(run_for_thread(THREAD))
            deadline = time.monotonic() + BOUND_S
            while owned(config):
                assert time.monotonic() < deadline, "the loss was never noticed"
                time.sleep(0.01)
            with pytest.raises(LeaseLostError) as lost:
                ensure_owned(config)
            assert lost.value.reason == "refused"
            before = saver.transcripts.list_refs(run_for_thread(THREAD))
            with pytest.raises(LeaseLostError):
                graph.invoke({"trail": []}, config, durability="sync")
            assert saver.transcripts.list_refs(run_for_thread(THREAD)) == before
    assert len(_refunds(spec)) == 1  # the first invocation's, before the loss


@pytest.mark.parametrize("locations", SHARED, indirect=True)
@pytest.mark.clause("L13")
def test_an_async_invocation_is_cancelled_soon_after_its_lease_is_lost(
    url_opener: UrlOpener,
) -> None:
    """L13: an asyncio hold whose thread is deleted mid-node cancels the running
    invocation and raises LeaseLostError (not CancelledError), within a third of
    the ttl plus scheduling slack (the renewal that learns it runs every ttl/3)."""

    async def scenario() -> float:
        options = {**url_opener.options, "ttl_ms": LOSS_TTL_MS}
        async with AsyncRulvarSaver.from_url(
            url_opener.url, owner="worker-a", **options
        ) as saver:
            started = asyncio.Event()

            async def forever(state: Any) -> dict[str, list[str]]:
                started.set()
                await asyncio.Event().wait()  # only a cancellation ends it
                return {"trail": ["never"]}

            builder = StateGraph(Trail)
            builder.add_node("forever", forever)
            builder.add_edge(START, "forever")
            builder.add_edge("forever", END)
            graph = builder.compile(checkpointer=saver)
            lost_at = 0.0

            async def invoke_held() -> None:
                nonlocal lost_at
                async with saver.hold(THREAD) as config:
                    invocation = asyncio.ensure_future(
                        graph.ainvoke({"trail": []}, config, durability="sync")
                    )
                    await asyncio.wait_for(started.wait(), BOUND_S)
                    await saver.journal.delete(run_for_thread(THREAD))
                    lost_at = time.monotonic()
                    await invocation

            with pytest.raises(LeaseLostError) as lost:
                await invoke_held()
            assert lost.value.reason == "refused"
            return time.monotonic() - lost_at

    elapsed_s = asyncio.run(scenario())
    assert elapsed_s < (LOSS_TTL_MS / 3 + LOSS_TTL_MS / 3) / 1000
