"""The savers' surface beyond the suites: opening, twins, ids, typed refusals."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from rulvar_conformance.suites.langgraph_ownership import three_node_graph
from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_store import (
    ConfigError,
    InvalidArgumentError,
    MemoryStore,
    open_store,
)


def _config(thread: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}}


def test_from_url_takes_store_options_in_the_url_and_as_keywords(
    tmp_path: Path,
) -> None:
    """ttl_ms reaches the store either way; the keyword wins (as open_store)."""
    url = f"sqlite:///{tmp_path / 'a.db'}?ttl_ms=4000"
    with RulvarSaver.from_url(url, owner="w") as saver:
        assert saver.journal.lease_ttl_ms == 4000  # type: ignore[attr-defined]  # SqliteStore
    with RulvarSaver.from_url(url, owner="w", ttl_ms=5000) as saver:
        assert saver.journal.lease_ttl_ms == 5000  # type: ignore[attr-defined]  # SqliteStore


def test_a_store_without_leases_and_fencing_is_refused(tmp_path: Path) -> None:
    """The file store declares neither leases nor fenced writes: ConfigError names them."""
    with (
        open_store(f"file://{tmp_path / 'files'}") as opened,
        pytest.raises(ConfigError, match="leases"),
    ):
        RulvarSaver.over(opened, owner="w")


def test_async_saver_refuses_sync_stores() -> None:
    """AsyncRulvarSaver needs asyncio stores; sync ones get a ConfigError."""
    store = MemoryStore()

    async def build() -> None:
        AsyncRulvarSaver(store, store.transcripts(), owner="w")  # type: ignore[arg-type]  # the mistake under test

    with pytest.raises(ConfigError, match="asyncio"):
        asyncio.run(build())


def test_bad_arguments_raise_typed_errors() -> None:
    """A missing thread_id, an unknown prune strategy and an unsafe checkpoint id."""
    store = MemoryStore()
    saver = RulvarSaver(store, store.transcripts(), owner="w")
    with pytest.raises(InvalidArgumentError):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidArgumentError):
        saver.prune(["t"], strategy="everything")
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "../escape"
    with pytest.raises(InvalidArgumentError):
        saver.put(_config("t"), checkpoint, {}, {})


def test_thread_ids_that_are_not_safe_tokens_round_trip() -> None:
    """'user:42/chat' is stored under an encoded run id and listed back as itself."""
    store = MemoryStore()
    saver = RulvarSaver(store, store.transcripts(), owner="w")
    graph = three_node_graph(saver, "w")
    with saver.hold("user:42/chat") as config:
        graph.invoke({"trail": []}, config)
    latest = saver.get_tuple(_config("user:42/chat"))
    assert latest is not None
    assert latest.config["configurable"]["thread_id"] == "user:42/chat"
    listed = {item.config["configurable"]["thread_id"] for item in saver.list(None)}
    assert listed == {"user:42/chat"}


def test_sync_saver_async_twins_and_delta_history() -> None:
    """RulvarSaver's a-methods work; the delta-channel walk finds the seed and later writes."""
    store = MemoryStore()
    saver = RulvarSaver(store, store.transcripts(), owner="w")
    graph = three_node_graph(saver, "w")

    async def run() -> Any:
        async with asyncio.timeout(60):
            with saver.hold("t") as config:
                await graph.ainvoke({"trail": []}, config)
            return await saver.aget_tuple(_config("t"))

    latest = asyncio.run(run())
    assert latest is not None
    history = saver.get_delta_channel_history(config=latest.config, channels=["trail"])
    # The parent holds the trail so far (the seed); n3's write came after it.
    assert history["trail"].get("seed") == ["n1:w", "n2:w"]
    assert [value for _, _, value in history["trail"]["writes"]] == [["n3:w"]]


def test_async_saver_sync_methods_work_from_another_thread() -> None:
    """get_tuple/put/list of AsyncRulvarSaver called off its loop, as LangGraph may."""

    async def run() -> None:
        async with AsyncRulvarSaver.from_url("memory://", owner="w") as saver:
            result: dict[str, Any] = {}

            def from_thread() -> None:
                checkpoint = empty_checkpoint()
                saver.put(_config("t"), checkpoint, {"step": 1}, {})
                result["latest"] = saver.get_tuple(_config("t"))
                result["listed"] = list(saver.list(_config("t")))

            thread = threading.Thread(target=from_thread)
            thread.start()
            await asyncio.to_thread(thread.join)
            assert result["latest"] is not None
            assert len(result["listed"]) == 1
            with pytest.raises(asyncio.InvalidStateError):
                saver.get_tuple(_config("t"))

    asyncio.run(run())


def _slow_graph(saver: Any, seconds: float, asynchronous: bool) -> Any:
    from langgraph.graph import END, START, StateGraph

    from rulvar_conformance.suites.langgraph_ownership import Trail

    def slow(state: Trail) -> dict[str, list[str]]:
        threading.Event().wait(seconds)
        return {"trail": ["slow"]}

    async def aslow(state: Trail) -> dict[str, list[str]]:
        await asyncio.sleep(seconds)
        return {"trail": ["slow"]}

    graph = StateGraph(Trail)
    graph.add_node("slow", aslow if asynchronous else slow)
    graph.add_node("after", lambda state: {"trail": ["after"]})
    graph.add_edge(START, "slow")
    graph.add_edge("slow", "after")
    graph.add_edge("after", END)
    return graph.compile(checkpointer=saver)


# A node outlasting the ttl (3 s) by a third: without renewals every third of the
# ttl, the hold's lease would have expired and the next write been refused.
RENEW_TTL_MS = 3_000
SLOW_S = 4.0


def test_a_hold_is_renewed_through_a_node_longer_than_the_ttl(tmp_path: Path) -> None:
    """The sync hold's renewals keep the lease through a 4 s node with a 3 s ttl."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with RulvarSaver.from_url(url, owner="w", ttl_ms=RENEW_TTL_MS) as saver:
        graph = _slow_graph(saver, SLOW_S, asynchronous=False)
        with saver.hold("t") as config:
            result = graph.invoke({"trail": []}, config, durability="sync")
    assert result["trail"] == ["slow", "after"]


def test_an_async_hold_is_renewed_through_a_node_longer_than_the_ttl(
    tmp_path: Path,
) -> None:
    """The async hold (over the asyncio store) renews at a third of the store's ttl."""
    url = f"sqlite:///{tmp_path / 'r.db'}?ttl_ms={RENEW_TTL_MS}"

    async def run() -> Any:
        async with AsyncRulvarSaver.from_url(url, owner="w") as saver:
            graph = _slow_graph(saver, SLOW_S, asynchronous=True)
            async with saver.hold("t") as config:
                return await graph.ainvoke({"trail": []}, config, durability="sync")

    assert asyncio.run(run())["trail"] == ["slow", "after"]
