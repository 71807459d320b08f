"""The 4-node graph of the worker-life tests: prep -> work -> refund -> done.

``refund`` is the side effect: it checks ownership first (``ensure_owned``) and
appends one line to a log, keyed by the thread (an idempotency key that stays
the same across takeovers). ``work`` is where a worker stalls when its spec
has a ``go`` file: it creates ``reached`` and waits for ``go`` (async nodes
wait with ``asyncio.sleep``, so a cancelled invocation stops there).
"""

from __future__ import annotations

import asyncio
import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from rulvar_langgraph import ensure_owned


class Trail(TypedDict):
    trail: Annotated[list[str], operator.add]


def refund_key(config: RunnableConfig) -> str:
    """The refund's idempotency key: the thread's, the same for every worker."""
    return f"refund:{config['configurable']['thread_id']}"


def life_graph(saver: Any, spec: dict[str, Any]) -> Any:
    """The graph for one worker; ``spec`` as in ``life_worker``."""
    owner = spec["owner"]
    reached = Path(spec["reached"]) if spec.get("reached") else None
    go = Path(spec["go"]) if spec.get("go") else None
    log = Path(spec["log"])
    is_async = spec.get("mode") == "async"

    def prep(state: Trail) -> dict[str, list[str]]:
        return {"trail": [f"prep:{owner}"]}

    def work_sync(state: Trail) -> dict[str, list[str]]:
        if go is not None and reached is not None:
            reached.write_text(owner)
            while not go.exists():
                time.sleep(0.01)
        return {"trail": [f"work:{owner}"]}

    async def work_async(state: Trail) -> dict[str, list[str]]:
        if go is not None and reached is not None:
            reached.write_text(owner)
            while not go.exists():
                await asyncio.sleep(0.01)
        return {"trail": [f"work:{owner}"]}

    def refund(state: Trail, config: RunnableConfig) -> dict[str, list[str]]:
        ensure_owned(config)  # L10: a worker that lost the thread stops here
        with log.open("a") as f:
            f.write(f"{refund_key(config)} {owner}\n")
        return {"trail": [f"refund:{owner}"]}

    def done(state: Trail) -> dict[str, list[str]]:
        return {"trail": [f"done:{owner}"]}

    graph = StateGraph(Trail)
    graph.add_node("prep", prep)
    graph.add_node("work", work_async if is_async else work_sync)
    graph.add_node("refund", refund)
    graph.add_node("done", done)
    graph.add_edge(START, "prep")
    graph.add_edge("prep", "work")
    graph.add_edge("work", "refund")
    graph.add_edge("refund", "done")
    graph.add_edge("done", END)
    return graph.compile(checkpointer=saver)
