"""A checkpoint's writes, one blob per task under its ref, and threads of earlier versions (G9, G10, T13).

The savers run over real stores of each backend; the blob store is wrapped
only to write down the calls that reach it (``test_hold_writes.Recording``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from rulvar_langgraph import RulvarSaver
from rulvar_langgraph._layout import (
    CheckpointRecord,
    StoredWrite,
    decode_writes,
    encode_checkpoint,
    encode_writes,
    old_checkpoint_ref,
    task_writes_ref,
    writes_ref,
)
from rulvar_store import OpenedStore
from rulvar_store.backend import LocationFactory
from tests.langgraph.test_hold_writes import Chain, _config, _pending_tasks, _saver


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


@pytest.mark.clause("G9")
@pytest.mark.clause("T13")
@pytest.mark.parametrize("length", [1, 30])
def test_a_fresh_read_of_the_latest_is_last_ref_and_one_get_under(
    opened: OpenedStore, length: int
) -> None:
    """The newest checkpoint and every task's writes: two reads at any length."""
    writer, _ = _saver(opened)
    with writer.hold("t") as config:
        chain = Chain(writer, config)
        for step in range(length):
            chain.put(step)
        for task in ("task-a", "task-b", "task-c"):
            chain.put_writes(task)
    reader, blobs = _saver(opened)
    found = reader.get_tuple(_config("t"))
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == chain.ids[-1]
    assert sorted(task for task, _, _ in found.pending_writes or []) == [
        "task-a",
        "task-b",
        "task-c",
    ]
    assert blobs.take() == ["last_ref", "get_under"]


def test_put_writes_writes_only_its_own_tasks_blob(opened: OpenedStore) -> None:
    """However many tasks wrote before, a task's blob holds its own writes only."""
    saver, _ = _saver(opened)
    with saver.hold("t") as config:
        chain = Chain(saver, config)
        chain.put(0)
        for task in range(40):
            chain.put_writes(f"task-{task}")
        saver.put_writes(cast(Any, chain.config), [("__error__", "boom")], "task-3")
    cid = chain.ids[-1]
    blob = opened.transcripts.get(task_writes_ref("t", "", cid, "task-39"))
    assert [w.task_id for w in decode_writes(blob)] == ["task-39"]
    again = decode_writes(
        opened.transcripts.get(task_writes_ref("t", "", cid, "task-3"))
    )
    assert [(w.task_id, w.channel) for w in again] == [
        ("task-3", "step"),
        ("task-3", "__error__"),
    ]
    assert len(_pending_tasks(saver, "t")) == 41


def test_unheld_put_writes_merges_into_the_tasks_blob(opened: OpenedStore) -> None:
    """Outside a hold the task's own blob is read and merged: a repeat is ignored."""
    saver, blobs = _saver(opened)
    chain = Chain(saver, _config("t"))
    chain.put(0)
    blobs.take()
    saver.put_writes(cast(Any, chain.config), [("step", "first")], "task-a")
    saver.put_writes(cast(Any, chain.config), [("step", "second")], "task-a")
    assert blobs.take() == ["get", "put", "get", "put"]
    found = saver.get_tuple(_config("t"))
    assert found is not None
    assert found.pending_writes == [("task-a", "step", "first")]


def _old_thread(opened: OpenedStore, saver: RulvarSaver) -> list[str]:
    """Two checkpoints stored as an earlier version did: ``<cid>`` and one ``w/`` blob each."""
    blobs = opened.transcripts
    ids: list[str] = []
    parent: str | None = None
    for step in range(2):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": step}
        record = CheckpointRecord(
            saver.serde.dumps_typed(checkpoint),
            saver.serde.dumps_typed({"source": "loop", "step": step}),
            parent,
        )
        cid = checkpoint["id"]
        blobs.put(old_checkpoint_ref("t", "", cid), encode_checkpoint(record))
        old_write = StoredWrite("old", 0, "step", saver.serde.dumps_typed("old"), "")
        blobs.put(writes_ref("t", "", cid), encode_writes([old_write]))
        ids.append(cid)
        parent = cid
    return ids


@pytest.mark.clause("G10")
def test_an_earlier_versions_thread_reads_merges_prunes_and_deletes(
    opened: OpenedStore,
) -> None:
    """Old checkpoints and writes blobs read as before, with new writes merged after."""
    saver, _ = _saver(opened)
    ids = _old_thread(opened, saver)
    found = saver.get_tuple(_config("t"))
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == ids[-1]
    assert found.pending_writes == [("old", "step", "old")]
    saver.put_writes(found.config, [("step", "new")], "new")
    assert _pending_tasks(saver, "t") == ["new", "old"]
    assert [
        f.config["configurable"]["checkpoint_id"] for f in saver.list(_config("t"))
    ] == ids[::-1]
    # A put of this version continues the old thread, and is its newest.
    chain = Chain(saver, found.config)
    chain.put(2)
    newest = saver.get_tuple(_config("t"))
    assert newest is not None
    assert newest.config["configurable"]["checkpoint_id"] == chain.ids[-1]
    saver.copy_thread("t", "copy")
    copied = saver.get_tuple(
        {
            "configurable": {
                "thread_id": "copy",
                "checkpoint_ns": "",
                "checkpoint_id": ids[-1],
            }
        }
    )
    assert copied is not None
    assert sorted(task for task, _, _ in copied.pending_writes or []) == ["new", "old"]
    saver.prune(["t"])
    assert all(chain.ids[-1] in ref for ref in opened.transcripts.list_refs("t"))
    saver.delete_thread("t")
    assert opened.transcripts.list_refs("t") == []


@pytest.mark.clause("G9")
def test_writes_above_the_newest_checkpoint_send_the_read_to_the_listing(
    opened: OpenedStore,
) -> None:
    """Writes against an id with no checkpoint own the greatest ref: the listing decides."""
    saver, blobs = _saver(opened)
    chain = Chain(saver, _config("t"))
    chain.put(0)
    orphan: Any = _config("t")
    orphan["configurable"]["checkpoint_id"] = "ffffffff-ffff-6fff-8fff-ffffffffffff"
    saver.put_writes(orphan, [("step", "late")], "late")
    blobs.take()
    found = saver.get_tuple(_config("t"))
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == chain.ids[-1]
    assert blobs.take() == ["last_ref", "list_refs", "get_under"]
    saver.prune(["t"])
    assert not any("ffffffff" in ref for ref in opened.transcripts.list_refs("t"))
