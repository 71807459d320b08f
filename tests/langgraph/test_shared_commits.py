"""A held invocation on SQLite: task writes share the step checkpoint's COMMIT (Q19, G-clauses).

LangGraph saves a task's writes in the background and the step's checkpoint
right after; under a hold the sync saver queues the writes (``queue_put``), so
both land in one transaction. Run through a real 4-node graph, the state and
history must equal ``InMemorySaver``'s, and the store must have run fewer
transactions than writes. A caller writing one call after another stops
queueing after the first write that waited in vain.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from rulvar_langgraph import RulvarSaver
from rulvar_store_sqlite import SqliteStore

NODES = ("a", "b", "c", "d")


class Trail(TypedDict):
    trail: Annotated[list[str], operator.add]


def _graph(saver: Any) -> Any:
    graph = StateGraph(Trail)
    for name in NODES:
        graph.add_node(name, lambda state, name=name: {"trail": [name]})
    for before, after in zip((START, *NODES), (*NODES, END), strict=True):
        graph.add_edge(before, after)
    return graph.compile(checkpointer=saver)


def _history(graph: Any, config: Any) -> list[tuple[Any, Any]]:
    return [(s.values, s.next) for s in graph.get_state_history(config)]


def test_held_invocations_share_commits_and_match_in_memory(tmp_path: Path) -> None:
    """G-clauses with Q19: same states as InMemorySaver, fewer transactions than writes."""
    reference = _graph(InMemorySaver())
    with SqliteStore(str(tmp_path / "lg.db")) as store:
        saver = RulvarSaver(store, store.transcripts(), owner="w")
        graph = _graph(saver)
        door = store._door  # the door's own counts
        batches, writes = door.batches, door.operations
        for n in range(5):
            thread = {"configurable": {"thread_id": f"t{n}"}}
            with saver.hold(f"t{n}") as config:
                final = graph.invoke({"trail": []}, config, durability="sync")
            expected = reference.invoke({"trail": []}, thread, durability="sync")
            assert final == expected == {"trail": list(NODES)}
            theirs = _history(reference, thread)
            assert _history(graph, {"configurable": {"thread_id": f"t{n}"}}) == theirs
        shared = (door.operations - writes) - (door.batches - batches)
    # Five task writes per invocation; on a busy machine a step's checkpoint
    # may come after the linger, so only "some shared" is asserted.
    assert shared > 0


def test_one_call_after_another_stops_queueing(tmp_path: Path) -> None:
    """A hold whose task write waited in vain writes the next ones at once."""
    with SqliteStore(str(tmp_path / "seq.db")) as store:
        blobs = store.transcripts()
        queued: list[str] = []
        queue_put = blobs.queue_put

        def counted(ref: str, *rest: Any) -> Any:
            queued.append(ref)
            return queue_put(ref, *rest)

        blobs.queue_put = counted  # type: ignore[method-assign,assignment]  # counting only
        saver = RulvarSaver(store, blobs, owner="w")
        graph = _graph(saver)
        with saver.hold("seq") as config:
            graph.invoke({"trail": []}, config, durability="sync")
            assert queued  # the graph's task writes were queued
            queued.clear()
            latest = saver.get_tuple(config)
            assert latest is not None
            for i in range(20):
                saver.put_writes(latest.config, [("trail", [f"w{i}"])], f"task-{i}")
        # Only the first waited for company (if the graph's last one had not already).
        assert len(queued) <= 1
        with saver.hold("seq") as config:
            stored = saver.get_tuple(config)
        assert stored is not None
        assert len(stored.pending_writes or []) == 20
