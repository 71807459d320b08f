"""Schedules of checkpoint and pending-write puts, and an oracle to judge them.

LangGraph's default durability (``"async"``) stores checkpoints in the
background, each after the previous one, and pending writes in the background
too, unordered against the checkpoints: ``put_writes`` on checkpoint C1 may
land before ``put(C0)``. A schedule is one such order of calls on one chain of
checkpoints; ``replay`` runs it on a saver (sync or async, with or without a
hold) and writes down what each read answers; the stock ``InMemorySaver`` run
through the same schedule is the oracle, and a fresh saver reading the store
afterwards must agree with it too.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias

from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver

__all__ = [
    "Answer",
    "Put",
    "PutWrites",
    "Read",
    "ReadAt",
    "Step",
    "adversarial_schedules",
    "answer",
    "areplay",
    "areplay_concurrently",
    "checkpoint_ids",
    "oracle",
    "replay",
    "replay_concurrently",
    "stored_answers",
    "stored_oracle",
]


@dataclass(frozen=True)
class Put:
    """Store checkpoint ``index`` of the chain (its parent is ``index - 1``)."""

    index: int


@dataclass(frozen=True)
class PutWrites:
    """One ``put_writes`` call of ``task`` on checkpoint ``index``."""

    index: int
    task: str
    writes: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Read:
    """``get_tuple`` without a checkpoint id: the newest."""


@dataclass(frozen=True)
class ReadAt:
    """``get_tuple`` of checkpoint ``index``."""

    index: int


Step: TypeAlias = Put | PutWrites | Read | ReadAt
Answer: TypeAlias = tuple[str, tuple[tuple[str, str, Any], ...]] | None
"""What a read saw: the checkpoint's id and its pending writes, sorted; or none."""

Call: TypeAlias = tuple[str, tuple[Any, ...]]


def checkpoint_ids(count: int) -> list[str]:
    """Fresh uuid6 ids, increasing like LangGraph's."""
    return [str(uuid6(clock_seq=i)) for i in range(count)]


def _checkpoint(checkpoint_id: str, index: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = checkpoint_id
    checkpoint["channel_values"] = {"step": index}
    checkpoint["channel_versions"] = {"step": index + 1}
    return checkpoint


def _at(config: Any, checkpoint_id: str | None) -> Any:
    configurable = {**config["configurable"]}
    configurable.pop("checkpoint_id", None)
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {**config, "configurable": configurable}


def answer(found: Any) -> Answer:
    """What a ``CheckpointTuple`` (or ``None``) says, comparable across savers."""
    if found is None:
        return None
    writes = tuple(sorted((t, c, repr(v)) for t, c, v in found.pending_writes or []))
    return str(found.config["configurable"]["checkpoint_id"]), writes


def _calls(
    steps: Sequence[Step], ids: Sequence[str], config: Any
) -> Generator[Call, Any, list[Answer]]:
    """The saver calls of a schedule, method name and arguments; reads' answers back."""
    answers: list[Answer] = []
    for step in steps:
        if isinstance(step, Put):
            parent = ids[step.index - 1] if step.index else None
            yield (
                "put",
                (
                    _at(config, parent),
                    _checkpoint(ids[step.index], step.index),
                    {"source": "loop", "step": step.index, "parents": {}},
                    {"step": step.index + 1},
                ),
            )
        elif isinstance(step, PutWrites):
            target = _at(config, ids[step.index])
            yield ("put_writes", (target, list(step.writes), step.task, ""))
        elif isinstance(step, Read):
            answers.append(answer((yield ("get_tuple", (_at(config, None),)))))
        else:
            target = _at(config, ids[step.index])
            answers.append(answer((yield ("get_tuple", (target,)))))
    return answers


def replay(
    saver: Any, config: Any, steps: Sequence[Step], ids: Sequence[str]
) -> list[Answer]:
    """Run the schedule through a sync saver, one call after the other."""
    plan = _calls(steps, ids, config)
    result: Any = None
    while True:
        try:
            name, args = plan.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's answers
        result = getattr(saver, name)(*args)


async def areplay(
    saver: Any, config: Any, steps: Sequence[Step], ids: Sequence[str]
) -> list[Answer]:
    """Run the schedule through an asyncio saver (the ``a``-prefixed methods)."""
    plan = _calls(steps, ids, config)
    result: Any = None
    while True:
        try:
            name, args = plan.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's answers
        result = await getattr(saver, "a" + name)(*args)


def oracle(steps: Sequence[Step], ids: Sequence[str], thread: str) -> list[Answer]:
    """What LangGraph's stock ``InMemorySaver`` answers to the same schedule."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return replay(InMemorySaver(), config, steps, ids)


def stored_answers(
    read: Callable[[Any], Any], thread: str, ids: Sequence[str], count: int
) -> list[Answer]:
    """The newest checkpoint and each of the first ``count`` of the chain, as read."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return [answer(read(config))] + [
        answer(read(_at(config, ids[i]))) for i in range(count)
    ]


def stored_oracle(
    steps: Sequence[Step], ids: Sequence[str], count: int
) -> list[Answer]:
    """``stored_answers`` of the stock saver after the whole schedule."""
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "oracle", "checkpoint_ns": ""}}
    replay(saver, config, [s for s in steps if not isinstance(s, (Read, ReadAt))], ids)
    return stored_answers(saver.get_tuple, "oracle", ids, count)


def _step_writes(index: int, task: str, rng: random.Random) -> list[PutWrites]:
    """A task's calls on one checkpoint: its regular writes, then maybe an interrupt."""
    calls = [PutWrites(index, task, (("a", f"{task}@{index}"), ("b", index)))]
    if rng.random() < 0.5:
        calls.append(PutWrites(index, task, (("__interrupt__", f"ask {task}"),)))
    return calls


def adversarial_schedules(count: int, checkpoints: int, seed: int) -> list[list[Step]]:
    """Random LangGraph-legal orders: puts in chain order, every put_writes anywhere.

    Each schedule starts with a read (an invocation's first ``get_tuple``) and
    has reads scattered through it. Seeded, so a failure names its schedule.
    """
    rng = random.Random(seed)
    schedules: list[list[Step]] = []
    for _ in range(count):
        writes: list[Step] = [
            call
            for index in range(checkpoints)
            for task in ("t1", "t2")
            for call in _step_writes(index, f"{task}-{index}", rng)
        ]
        puts: list[Step] = [Put(i) for i in range(checkpoints)]
        # Interleave: the puts keep their order, every write lands anywhere.
        merged: list[Step] = []
        while puts or writes:
            if writes and (not puts or rng.random() < 0.6):
                merged.append(writes.pop(rng.randrange(len(writes))))
            else:
                merged.append(puts.pop(0))
            if rng.random() < 0.25:
                merged.append(Read())
        merged.append(Read())
        schedules.append([Read(), *merged])
    return schedules


def _chained(steps: Sequence[Step]) -> tuple[list[Put], list[PutWrites]]:
    puts = [s for s in steps if isinstance(s, Put)]
    writes = [s for s in steps if isinstance(s, PutWrites)]
    return puts, writes


def replay_concurrently(
    saver: Any, config: Any, steps: Sequence[Step], ids: Sequence[str], seed: int
) -> None:
    """Issue the schedule's calls as LangGraph's background executor does.

    Checkpoint puts run one after the other on one thread; every put_writes
    is submitted to a pool at once, each after a random short pause.
    """
    puts, writes = _chained(steps)
    rng = random.Random(seed)
    pauses = [rng.random() * 0.004 for _ in writes]
    start = threading.Event()

    def one_write(step: PutWrites, pause: float) -> None:
        start.wait()
        threading.Event().wait(pause)
        replay(saver, config, [step], ids)

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(one_write, w, p) for w, p in zip(writes, pauses, strict=True)
        ]
        start.set()
        replay(saver, config, puts, ids)
        for future in futures:
            future.result()


async def areplay_concurrently(
    saver: Any, config: Any, steps: Sequence[Step], ids: Sequence[str], seed: int
) -> None:
    """The asyncio twin: the puts chained in one task, each put_writes a task of its own."""
    puts, writes = _chained(steps)
    rng = random.Random(seed)

    async def one_write(step: PutWrites, pause: float) -> None:
        await asyncio.sleep(pause)
        await areplay(saver, config, [step], ids)

    tasks = [asyncio.ensure_future(one_write(w, rng.random() * 0.004)) for w in writes]
    await areplay(saver, config, puts, ids)
    await asyncio.gather(*tasks)
