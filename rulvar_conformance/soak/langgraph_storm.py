"""A LangGraph thread stormed through the saver by real writer processes (issue 18 item 4).

``storm_langgraph_thread(url, options, ...)`` starts writer processes
(``python -m rulvar_conformance.soak.langgraph_storm``) that loop: hold ONE
thread, invoke a real 3-node graph through ``RulvarSaver``, release. Meanwhile
the parent pauses writers past the ttl (SIGSTOP, then SIGCONT) and SIGKILLs and
restarts them, so holders are superseded mid-node and wake up as zombies.

Every node appends ``<node>:<owner>:<epoch>`` (the epoch of the lease its
config carries) to the thread's trail. The referee then walks the final chain
from the latest checkpoint through its parents: a checkpoint that landed after
a holder with a higher epoch had written is a superseded holder's write, which
fencing must refuse. So along the chain, oldest first, and along each trail,
epochs never fall (G2 under chaos). Bounded by ``duration_s`` and a deadline
on every child.
"""

from __future__ import annotations

import json
import operator
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Final, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from rulvar_conformance.harness.processes import finish, start_module
from rulvar_langgraph import LEASE_KEY, RulvarSaver
from rulvar_store import LeaseHeldError, RulvarError

__all__ = ["StormVerdict", "referee_chain", "storm_langgraph_thread"]

MODULE: Final = "rulvar_conformance.soak.langgraph_storm"
THREAD: Final = "lg-storm"
NODE_SLEEP_S: Final = 0.02
STOP_GRACE_S: Final = 20.0
STOP_WAIT_S: Final = 90.0
"""How long a writer gets to see the stop file and leave: one restarted just
before the stop may still be importing LangGraph, which on a loaded 2-core
machine takes tens of seconds (a writer killed at this bound is an error)."""
STARTUP_BOUND_S: Final = 30.0
KILL_SHARE: Final = 0.15


@dataclass
class StormVerdict:
    """What the storm did and what the referee found in the final chain."""

    violations: list[str] = field(default_factory=list)
    chain_length: int = 0
    epochs: list[int] = field(default_factory=list)
    pauses: int = 0
    kills: int = 0
    writer_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.writer_errors


def _epoch(marker: str) -> int:
    return int(marker.rsplit(":", 1)[1])


def referee_chain(chain: list[list[str]]) -> list[str]:
    """Violations in a chain of trails, oldest checkpoint first.

    A checkpoint's newest marker is the node write that made it; its epoch must
    not be below any epoch written before it in the chain, and each trail's
    epochs must not fall either.
    """
    violations: list[str] = []
    highest = 0
    for position, trail in enumerate(chain):
        epochs = [_epoch(marker) for marker in trail]
        if any(later < earlier for earlier, later in pairwise(epochs)):
            violations.append(f"checkpoint {position}: trail epochs fall: {trail}")
        if epochs:
            if epochs[-1] < highest:
                violations.append(
                    f"checkpoint {position} was written at epoch {epochs[-1]} after "
                    f"epoch {highest} had written: a superseded holder's checkpoint"
                )
            highest = max(highest, epochs[-1])
    return violations


def _final_chain(url: str, options: dict[str, Any]) -> list[list[str]]:
    chain: list[list[str]] = []
    with RulvarSaver.from_url(url, owner="storm-referee", **options) as saver:
        config: Any = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
        found = saver.get_tuple(config)
        while found is not None:
            chain.append(list(found.checkpoint["channel_values"].get("trail") or []))
            parent = found.parent_config
            found = None if parent is None else saver.get_tuple(parent)
    chain.reverse()
    return chain


class _Writers:
    """The writer processes, each logging stderr to its own file (no pipe to fill)."""

    def __init__(self, spec: dict[str, Any], logs: Path) -> None:
        self._spec = spec
        self._logs = logs
        self._started = 0
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, slot: str) -> None:
        self._started += 1
        owner = f"{slot}.{self._started}"
        with (self._logs / f"{owner}.log").open("wb") as log:
            self.children[slot] = start_module(
                MODULE,
                json.dumps({**self._spec, "owner": owner}),
                env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                stderr=log,
            )
        self.children[slot].owner = owner  # type: ignore[attr-defined]  # for the report

    def tail(self, slot: str) -> str:
        owner = self.children[slot].owner  # type: ignore[attr-defined]
        return (self._logs / f"{owner}.log").read_text(errors="replace")[-400:]


def _first_checkpoint(url: str, options: dict[str, Any], bound_s: float) -> bool:
    """Wait (bounded) until a writer has landed a checkpoint: they start slowly."""
    deadline = time.monotonic() + bound_s
    with RulvarSaver.from_url(url, owner="storm-referee", **options) as saver:
        config: Any = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
        while time.monotonic() < deadline:
            if saver.get_tuple(config) is not None:
                return True
            time.sleep(0.1)
    return False


def storm_langgraph_thread(
    url: str,
    options: dict[str, Any],
    *,
    writers: int = 3,
    duration_s: float = 10.0,
    ttl_ms: int = 400,
    seed: int = 0,
    workdir: Path,
) -> StormVerdict:
    """Storm one thread for ``duration_s``, stop the writers, referee the chain.

    ``workdir`` receives the stop file and the writers' logs.
    """
    rng = random.Random(seed)
    stop_file = workdir / "stop"
    spec = {"url": url, "options": options, "ttl_ms": ttl_ms, "stop": str(stop_file)}
    verdict = StormVerdict()
    pool = _Writers(spec, workdir)
    for n in range(writers):
        pool.start(f"w{n}")
    try:
        if not _first_checkpoint(url, options, STARTUP_BOUND_S):
            verdict.writer_errors.append("no writer landed a checkpoint in time")
            return verdict
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.1, 0.4))
            slot = rng.choice(sorted(pool.children))
            child = pool.children[slot]
            if child.poll() is not None:
                verdict.writer_errors.append(
                    f"{slot} exited {child.returncode}: {pool.tail(slot)}"
                )
                pool.start(slot)
            elif rng.random() < KILL_SHARE:
                child.send_signal(signal.SIGKILL)
                finish(child, STOP_GRACE_S)
                verdict.kills += 1
                pool.start(slot)
            else:
                # Paused past the ttl: a successor may take the thread over, and
                # this writer wakes up as a zombie in whatever it was doing.
                child.send_signal(signal.SIGSTOP)
                time.sleep(ttl_ms / 1000 * rng.uniform(1.2, 2.0))
                child.send_signal(signal.SIGCONT)
                verdict.pauses += 1
    finally:
        stop_file.write_text("stop")
        for slot, child in pool.children.items():
            child.send_signal(signal.SIGCONT)
            done = finish(child, STOP_WAIT_S)
            if done.returncode != 0:
                verdict.writer_errors.append(
                    f"{slot} exited {done.returncode}: {pool.tail(slot)}"
                )
    chain = _final_chain(url, options)
    verdict.chain_length = len(chain)
    verdict.epochs = sorted({_epoch(m) for trail in chain for m in trail})
    verdict.violations = referee_chain(chain)
    return verdict


# --- the writer process ---------------------------------------------------------------


class Trail(TypedDict):
    """The thread's state: every node appends ``<node>:<owner>:<epoch>``."""

    trail: Annotated[list[str], operator.add]


def _writer(spec: dict[str, Any]) -> None:
    owner = spec["owner"]

    def node(name: str) -> Any:
        def run(state: Trail, config: RunnableConfig) -> dict[str, list[str]]:
            time.sleep(NODE_SLEEP_S)  # a SIGSTOP lands inside a node often
            epoch = config["configurable"][LEASE_KEY].epoch
            return {"trail": [f"{name}:{owner}:{epoch}"]}

        return run

    graph_builder = StateGraph(Trail)
    for name in ("n1", "n2", "n3"):
        graph_builder.add_node(name, node(name))
    graph_builder.add_edge(START, "n1")
    graph_builder.add_edge("n1", "n2")
    graph_builder.add_edge("n2", "n3")
    graph_builder.add_edge("n3", END)
    stop = Path(spec["stop"])
    options = {**spec["options"], "ttl_ms": spec["ttl_ms"]}
    with RulvarSaver.from_url(spec["url"], owner=owner, **options) as saver:
        graph = graph_builder.compile(checkpointer=saver)
        while not stop.exists():
            try:
                with saver.hold(THREAD) as config:
                    graph.invoke({"trail": []}, config, durability="sync")
            except LeaseHeldError:
                # Refused (superseded) or the thread is held: the holder owns it.
                time.sleep(spec["ttl_ms"] / 10_000)
            except RulvarError as exc:
                # A paused writer can hold the database's write lock past the
                # busy bound; nothing was written, so try again.
                if not exc.retryable:
                    raise
                time.sleep(spec["ttl_ms"] / 10_000)


if __name__ == "__main__":
    _writer(json.loads(sys.argv[1]))
