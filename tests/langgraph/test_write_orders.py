"""Pending writes that land before their checkpoint (issue 39; G15, G18).

LangGraph's default durability stores a step's pending writes in the
background, unordered against the checkpoint puts: ``put_writes(C1)`` may
land before ``put(C0)`` and ``put(C1)``. Each test runs on memory, SQLite and
PostgreSQL, sync and asyncio, inside a hold and outside one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from rulvar_conformance.suites._write_orders import (
    Put,
    PutWrites,
    Read,
    Step,
    areplay,
    checkpoint_ids,
    replay,
)
from rulvar_conformance.suites.langgraph_orders import ISSUE_ORDER
from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_langgraph._hold_cache import HoldCache
from rulvar_store import Lease, OpenedStore
from rulvar_store.backend import LocationFactory, adapt_opened

THREAD = "t"


@pytest.fixture
def opened(locations: LocationFactory) -> Iterator[OpenedStore]:
    location = locations()
    try:
        store = location.open(None)
        try:
            yield store
        finally:
            store.close()
    finally:
        location.remove()


def _config(checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": THREAD, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _issue_answers(ids: list[str]) -> list[Any]:
    """What issue 39's order must read: the stock saver's answers, spelled out."""
    first = ("task-1", "a", "1")
    ask = ("task-1", "__interrupt__", "'ask'")
    return [
        None,
        (ids[1], (first,)),
        (ids[1], tuple(sorted([first, ask]))),
        (ids[0], ()),
    ]


class Unindexed:
    """A real blob store without the optional reads (last_ref, get_under): the
    saver then finds the newest checkpoint and the writes in the listing."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("last_ref", "get_under"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def _saver(opened: OpenedStore, indexed: bool, owner: str = "worker") -> RulvarSaver:
    blobs = opened.transcripts if indexed else Unindexed(opened.transcripts)
    return RulvarSaver(opened.journal, cast(Any, blobs), owner=owner)


def _stored(saver: RulvarSaver) -> list[tuple[str, str, Any]]:
    found = saver.get_tuple(_config())
    assert found is not None
    return sorted(found.pending_writes or [], key=repr)


@pytest.mark.clause("G15")
@pytest.mark.parametrize("indexed", [True, False], ids=["last_ref", "listing"])
@pytest.mark.parametrize("held", [True, False], ids=["held", "unheld"])
def test_issue_39_order_keeps_the_pending_writes(
    opened: OpenedStore, held: bool, indexed: bool
) -> None:
    """put_writes(C1), put(C0), put(C1): the read sees task-1's write, and the
    interrupt written after it joins it in the store instead of replacing it."""
    saver = _saver(opened, indexed)
    ids = checkpoint_ids(2)
    if held:
        with saver.hold(THREAD) as config:
            answers = replay(saver, config, ISSUE_ORDER, ids)
    else:
        answers = replay(saver, _config(), ISSUE_ORDER, ids)
    assert answers == _issue_answers(ids)
    fresh = RulvarSaver(opened.journal, opened.transcripts, owner="reader")
    assert _stored(fresh) == [("task-1", "__interrupt__", "ask"), ("task-1", "a", 1)]


@pytest.mark.clause("G15")
@pytest.mark.parametrize("held", [True, False], ids=["held", "unheld"])
def test_issue_39_order_keeps_the_pending_writes_asyncio(
    opened: OpenedStore, held: bool
) -> None:
    """The asyncio saver, same order and the same answers."""
    ids = checkpoint_ids(2)

    async def scenario() -> list[Any]:
        served = adapt_opened(opened)
        try:
            saver = AsyncRulvarSaver(served.journal, served.transcripts, owner="w")
            if not held:
                return await areplay(saver, _config(), ISSUE_ORDER, ids)
            async with saver.hold(THREAD) as config:
                return await areplay(saver, config, ISSUE_ORDER, ids)
        finally:
            await served.aclose()

    assert asyncio.run(scenario()) == _issue_answers(ids)


@pytest.mark.clause("G15")
@pytest.mark.parametrize("indexed", [True, False], ids=["last_ref", "listing"])
@pytest.mark.parametrize("first_call", ["get_tuple", "put"])
def test_writes_stored_before_the_hold_above_the_newest_checkpoint_are_kept(
    opened: OpenedStore, first_call: str, indexed: bool
) -> None:
    """An earlier invocation's writes on C1 landed, its put(C1) did not: a hold
    that then puts C1 reads them back instead of assuming C1 has none."""
    saver = _saver(opened, indexed)
    ids = checkpoint_ids(2)
    replay(saver, _config(), [Put(0), PutWrites(1, "early", (("a", 1),))], ids)
    with saver.hold(THREAD) as config:
        steps: list[Step] = [Read()] if first_call == "get_tuple" else []
        steps += [Put(1), Read(), PutWrites(1, "early", (("__interrupt__", "x"),))]
        answers = replay(saver, config, steps, ids)
    assert answers[-1] == (ids[1], (("early", "a", "1"),))
    fresh = RulvarSaver(opened.journal, opened.transcripts, owner="reader")
    assert _stored(fresh) == [("early", "__interrupt__", "x"), ("early", "a", 1)]


@pytest.mark.clause("G18")
def test_a_new_checkpoint_is_assumed_empty_only_without_writes_under_its_id() -> None:
    """The hold's rule itself: ids written (or found) under are read afresh."""
    cache = HoldCache(Lease("t", "o", 1))
    cache.new_checkpoint("", "c0")
    assert cache.known_writes("", "c0") == {}
    cache.writing("", "c2")
    cache.listed("", ["c3"])
    cache.writing("sub", "c1")
    cache.new_checkpoint("", "c2")
    assert cache.known_writes("", "c2") is None
    cache.clear()
    cache.new_checkpoint("", "c3")
    assert cache.known_writes("", "c3") is None  # the ids outlive a clear
    # Only ids above the newest checkpoint stay (per namespace): bounded.
    assert cache.with_writes == {("sub", "c1")}
    cache.new_checkpoint("", "c4")
    assert cache.known_writes("", "c4") == {}


class PausedPut:
    """A real blob store whose next put of a writes blob parks until released."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.armed = False
        self.reached = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != "put":
            return attr

        def put(ref: str, blob: bytes, *rest: Any) -> Any:
            if self.armed and "/w/" in ref:
                self.armed = False
                self.reached.set()
                assert self.go.wait(10)
            return attr(ref, blob, *rest)

        return put


@pytest.mark.clause("G18")
@pytest.mark.clause("G10")
def test_delete_for_runs_waits_for_a_held_write_in_flight(opened: OpenedStore) -> None:
    """A held put_writes in flight when delete_for_runs starts is dropped with
    its checkpoint: the delete runs under the thread's lock, so no write of the
    dropped checkpoint lands after it read the thread."""
    blobs = PausedPut(opened.transcripts)
    saver = RulvarSaver(opened.journal, cast(Any, blobs), owner="worker")
    ids = checkpoint_ids(2)
    with saver.hold(THREAD) as config:

        def at(checkpoint_id: str | None) -> Any:
            configurable = dict(config["configurable"])
            if checkpoint_id is not None:
                configurable["checkpoint_id"] = checkpoint_id
            return {**config, "configurable": configurable}

        for index in range(2):
            checkpoint = empty_checkpoint()
            checkpoint["id"] = ids[index]
            parent = at(ids[0] if index else None)
            saver.put(parent, checkpoint, {"run_id": f"run-{index}"}, {})
        at_c1 = at(ids[1])
        saver.put_writes(at_c1, [("a", 1)], "t1")
        blobs.armed = True
        writer = threading.Thread(
            target=saver.put_writes, args=(at_c1, [("a", 2)], "t1")
        )
        writer.start()
        assert blobs.reached.wait(10)
        deleter = threading.Thread(target=saver.delete_for_runs, args=(["run-1"],))
        deleter.start()
        deleter.join(0.3)  # under the thread's lock it waits for the writer
        blobs.go.set()
        writer.join(10)
        deleter.join(10)
        found = saver.get_tuple(config)
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == ids[0]
    left = [ref for ref in opened.transcripts.list_refs(THREAD) if ids[1] in ref]
    assert left == []
