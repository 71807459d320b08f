"""What a held write costs and what a hold remembers (G14, T12, G13).

The savers run over real stores of each backend; the blob store is wrapped only to
write down which of its methods the saver calls, so "one write, no read" is an
observed fact about the calls that reach the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, cast

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_store import InvalidArgumentError, OpenedStore
from rulvar_store.backend import LocationFactory, adapt_opened

BLOB_CALLS = ("put", "put_many", "get", "list_refs", "last_ref", "get_under", "delete")
OPTIONAL_READS = ("last_ref", "get_under")
# A hold's task writes may be queued (SQLite's queue_put, awaited by
# await_put): the same one write of the blob, written down as a put.
SAME_WRITE = {"queue_put": "put"}


class Recording:
    """A real blob store that writes down each call; ``indexed=False`` hides the
    optional reads (last_ref, get_under)."""

    def __init__(self, inner: Any, *, indexed: bool = True) -> None:
        self._inner = inner
        self._indexed = indexed
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name in OPTIONAL_READS and not self._indexed:
            raise AttributeError(name)
        attr = getattr(self._inner, name)
        if name not in BLOB_CALLS and name not in SAME_WRITE:
            return attr

        def recorded(*args: Any) -> Any:
            self.calls.append(SAME_WRITE.get(name, name))
            return attr(*args)

        return recorded

    def take(self) -> list[str]:
        calls, self.calls = self.calls, []
        return calls


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


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


class Chain:
    """Chained checkpoints of one thread through one saver (sync or async)."""

    def __init__(self, saver: Any, config: Any) -> None:
        self.saver = saver
        self.config = dict(config)
        self.ids: list[str] = []

    def _args(self, step: int) -> tuple[Any, Any, Any]:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": step}
        checkpoint["channel_versions"] = {"step": step + 1}
        return checkpoint, {"source": "loop", "step": step}, {"step": step + 1}

    def _moved(self, stored: Any) -> None:
        self.config = {
            **self.config,
            "configurable": {
                **self.config["configurable"],
                **stored["configurable"],
            },
        }
        self.ids.append(stored["configurable"]["checkpoint_id"])

    def put(self, step: int) -> None:
        self._moved(self.saver.put(self.config, *self._args(step)))

    async def aput(self, step: int) -> None:
        self._moved(await self.saver.aput(self.config, *self._args(step)))

    def put_writes(self, task: str) -> None:
        self.saver.put_writes(self.config, [("step", task)], task)


def _saver(
    opened: OpenedStore, *, indexed: bool = True
) -> tuple[RulvarSaver, Recording]:
    blobs = Recording(opened.transcripts, indexed=indexed)
    return RulvarSaver(opened.journal, cast(Any, blobs), owner="worker"), blobs


def _latest_id(saver: RulvarSaver, thread: str) -> str:
    found = saver.get_tuple(_config(thread))
    assert found is not None
    return str(found.config["configurable"]["checkpoint_id"])


@pytest.mark.clause("G14")
@pytest.mark.clause("T12")
def test_a_held_put_is_one_put_and_no_read_once_the_hold_knows_the_namespace(
    opened: OpenedStore,
) -> None:
    """The first held put asks last_ref; every later one is one put, no pointer."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        assert "last_ref" in blobs.take()
        for step in range(1, 4):
            chain.put(step)
            assert blobs.take() == ["put"], step
    assert _latest_id(saver, "t") == chain.ids[-1]
    assert len(list(saver.list(_config("t")))) == 4


def _pending_tasks(saver: RulvarSaver, thread: str) -> list[str]:
    found = saver.get_tuple(_config(thread))
    assert found is not None
    return sorted(task for task, _, _ in found.pending_writes or [])


@pytest.mark.clause("G14")
def test_held_put_writes_to_a_checkpoint_the_hold_created_read_nothing(
    opened: OpenedStore,
) -> None:
    """A checkpoint the hold just created has no writes yet: nothing to read."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        blobs.take()
        chain.put_writes("task-a")
        assert blobs.take() == ["put"]
        chain.put_writes("task-b")
        assert blobs.take() == ["put"]
    assert _pending_tasks(saver, "t") == ["task-a", "task-b"]


@pytest.mark.clause("G14")
def test_held_put_writes_to_an_older_checkpoint_read_its_writes_once(
    opened: OpenedStore,
) -> None:
    """Writes to a checkpoint stored before the hold are read once, then merged."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        Chain(saver, config).put(0)
    first = saver.get_tuple(_config("t"))
    assert first is not None
    saver.put_writes(first.config, [("step", "before")], "before")
    with saver.hold("t") as config:
        chain = Chain(
            saver,
            {
                **config,
                "configurable": {
                    **first.config["configurable"],
                    **config["configurable"],
                },
            },
        )
        blobs.take()
        chain.put_writes("task-a")
        assert blobs.take() == ["get_under", "put"]  # every task's writes, once
        chain.put_writes("task-b")
        assert blobs.take() == ["put"]
    assert _pending_tasks(saver, "t") == ["before", "task-a", "task-b"]


@pytest.mark.clause("G14")
def test_a_held_read_of_the_latest_fills_what_the_hold_remembers(
    opened: OpenedStore,
) -> None:
    """An invocation's first read serves its first put and put_writes: no read again."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        blobs.take()
        assert saver.get_tuple(config) is None
        assert blobs.take() == ["last_ref"]
        chain.put(0)
        assert blobs.take() == ["put"]
    stored = _config("t")
    stored["configurable"]["checkpoint_id"] = chain.ids[-1]
    saver.put_writes(stored, [("step", "before")], "before")
    with saver.hold("t") as config:
        blobs.take()
        found = saver.get_tuple(config)
        assert found is not None
        assert blobs.take() == ["last_ref", "get_under"]  # newest; it and its writes
        again = saver.get_tuple(config)
        assert again is not None
        assert again.pending_writes == found.pending_writes
        assert blobs.take() == ["get"]  # the checkpoint only
        chain = Chain(saver, found.config)
        chain.put_writes("task-a")
        assert blobs.take() == ["put"]
        chain.put(1)
        assert blobs.take() == ["put"]
    assert _pending_tasks(saver, "t") == []
    assert len(list(saver.list(_config("t")))) == 2


@pytest.mark.clause("G14")
def test_the_hold_forgets_at_exit(opened: OpenedStore) -> None:
    """Nothing of a hold outlives it: the next hold reads the namespace again."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        chain.put(1)
    assert saver._caches == {}
    blobs.take()
    with saver.hold("t") as config:
        later = Chain(saver, config)
        later.put(2)
        assert "last_ref" in blobs.take()
    assert _latest_id(saver, "t") == later.ids[-1]


@pytest.mark.clause("G14")
def test_prune_and_copy_inside_a_hold_clear_what_it_remembers(
    opened: OpenedStore,
) -> None:
    """prune changes a namespace; the next held put reads its newest afresh."""
    saver, blobs = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        for step in range(3):
            chain.put(step)
        saver.prune(["t"])
        blobs.take()
        chain.put(3)
        assert "last_ref" in blobs.take()
        saver.copy_thread("other", "t")
        blobs.take()
        chain.put(4)
        assert "last_ref" in blobs.take()
    assert _latest_id(saver, "t") == chain.ids[-1]


@pytest.mark.clause("T12")
@pytest.mark.clause("G9")
def test_without_last_ref_the_saver_finds_the_newest_in_the_listing(
    opened: OpenedStore,
) -> None:
    """A blob store without last_ref (nor get_under) still serves: one listing read, one put."""
    saver, blobs = _saver(opened, indexed=False)
    chain = Chain(saver, _config("t"))
    for step in range(3):
        chain.put(step)
    blobs.take()
    chain.put(3)
    assert blobs.take() == ["list_refs", "put"]
    assert _latest_id(saver, "t") == chain.ids[-1]
    assert blobs.take() == ["list_refs", "get"]  # the listing names its writes: none
    with saver.hold("t") as config:
        held = Chain(
            saver,
            {
                **config,
                "configurable": {
                    **chain.config["configurable"],
                    **config["configurable"],
                },
            },
        )
        held.put(4)
        blobs.take()
        held.put(5)
        assert blobs.take() == ["put"]
    assert _latest_id(saver, "t") == held.ids[-1]


@pytest.mark.clause("G10")
def test_old_pointer_blobs_are_ignored_and_deleted_with_the_thread(
    opened: OpenedStore,
) -> None:
    """A pointer an earlier version left (naming an older checkpoint) is not read."""
    saver, _ = _saver(opened)
    chain = Chain(saver, _config("t"))
    chain.put(0)
    chain.put(1)
    stale = f"t/p/{_NS_ROOT}"
    opened.transcripts.put(stale, chain.ids[0].encode())
    assert _latest_id(saver, "t") == chain.ids[-1]
    assert [
        found.config["configurable"]["checkpoint_id"]
        for found in saver.list(_config("t"))
    ] == chain.ids[::-1]
    saver.copy_thread("t", "copy")
    assert stale.replace("t/", "copy/", 1) not in opened.transcripts.list_refs("copy")
    saver.delete_thread("t")
    assert opened.transcripts.list_refs("t") == []


_NS_ROOT = "n"
"""The root namespace's ref segment (``_layout``: ``n`` + the hex of ``""``)."""


@pytest.mark.clause("G13")
def test_an_unheld_put_still_reads_the_newest(opened: OpenedStore) -> None:
    """Outside a hold nothing is remembered: every put asks last_ref (G13)."""
    saver, blobs = _saver(opened)
    chain = Chain(saver, _config("t"))
    chain.put(0)
    blobs.take()
    chain.put(1)
    assert "last_ref" in blobs.take()


@pytest.mark.clause("G14")
def test_the_async_saver_shares_the_one_write_put(opened: OpenedStore) -> None:
    """aput in a hold is one put too (the plans are the sync saver's)."""

    async def scenario() -> list[str]:
        served = adapt_opened(opened)
        try:
            blobs = Recording(served.transcripts)
            saver = AsyncRulvarSaver(served.journal, cast(Any, blobs), owner="worker")
            async with saver.hold("t") as config:
                chain = Chain(saver, config)
                await chain.aput(0)
                blobs.take()
                await chain.aput(1)
                return blobs.take()
        finally:
            await served.aclose()  # closes ``opened`` too; its fixture close is a no-op

    assert asyncio.run(scenario()) == ["put"]


@pytest.mark.clause("G14")
def test_a_second_saver_refuses_to_write_with_another_savers_hold_config(
    opened: OpenedStore,
) -> None:
    """The hold's memory stays whole: no other saver object writes under its lease."""
    saver, _ = _saver(opened)
    other = RulvarSaver(opened.journal, opened.transcripts, owner="worker")
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        chain.put_writes("task-a")
        foreign = Chain(other, chain.config)
        with pytest.raises(InvalidArgumentError, match="another saver object"):
            foreign.put_writes("task-b")
        with pytest.raises(InvalidArgumentError, match="another saver object"):
            foreign.put(1)
        found = other.get_tuple(cast(Any, chain.config))  # a read changes nothing
        assert found is not None
        chain.put_writes("task-c")
    assert _pending_tasks(saver, "t") == ["task-a", "task-c"]
    assert len(list(saver.list(_config("t")))) == 1


class JournalCalls:
    """A real journal that writes down its meta calls."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in ("get_meta", "put_meta", "put_with_meta"):
            return attr

        def recorded(*args: Any) -> Any:
            self.calls.append(name)
            return attr(*args)

        return recorded


@pytest.mark.clause("G11")
@pytest.mark.clause("G14")
def test_a_new_thread_writes_its_meta_unread_and_a_subgraph_reads_it_first(
    opened: OpenedStore,
) -> None:
    """The first root checkpoint puts the thread's meta with no get_meta; a
    subgraph namespace's first checkpoint reads the meta and keeps it."""
    journal = JournalCalls(opened.journal)
    saver = RulvarSaver(cast(Any, journal), opened.transcripts, owner="worker")
    # SQLite lands the first checkpoint and the meta in one put_with_meta.
    first = "put_with_meta" if saver._fused else "put_meta"
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        assert journal.calls == [first]
        chain.put(1)
        assert journal.calls == [first]
        inner = Chain(
            saver,
            {
                **config,
                "configurable": {**config["configurable"], "checkpoint_ns": "n2:x"},
            },
        )
        inner.put(0)
        assert journal.calls == [first, "get_meta"]
    metas = opened.journal.list_runs()
    assert [meta.get("threadId") for meta in metas] == ["t"]
