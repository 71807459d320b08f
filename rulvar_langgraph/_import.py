"""Bringing threads of another LangGraph checkpointer into a fenced store (G17).

``import_threads(source, target)`` reads each thread through the source
saver's public API (``list``), so it works from LangGraph's stock savers
(``SqliteSaver``, ``PostgresSaver``, ``InMemorySaver``) and any other, and
writes it through the target's ``put`` and ``put_writes`` inside a hold of the
target thread: the copy is fenced like any invocation, and refused while
another worker holds the thread. Checkpoints go oldest first (uuid6 ids grow
with time, so a parent comes before its children), each with its metadata,
parent link and pending writes. Running it again writes the same checkpoints
and the same writes (regular writes are insert-or-ignore, special ones
replace): it changes nothing.

What the source's API does not give is not copied: a write's ``task_path``
(stock savers keep it but do not return it; the target then orders a
checkpoint's writes by task id), and pending writes stored against a
checkpoint id that has no checkpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from rulvar_langgraph._async import AsyncRulvarSaver
from rulvar_langgraph._sync import RulvarSaver

__all__ = ["aimport_threads", "import_threads"]

Call: TypeAlias = tuple[str, tuple[Any, ...]]
"""A target saver call: method name (``put``/``put_writes``) and arguments."""


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _ordered(items: Iterable[CheckpointTuple]) -> list[CheckpointTuple]:
    """Oldest first: by checkpoint id, then namespace (parents before children)."""
    return sorted(
        items,
        key=lambda item: (
            str(item.config["configurable"]["checkpoint_id"]),
            str(item.config["configurable"].get("checkpoint_ns") or ""),
        ),
    )


def _thread_ids(items: Iterable[CheckpointTuple]) -> list[str]:
    return sorted({str(item.config["configurable"]["thread_id"]) for item in items})


def _calls(item: CheckpointTuple, held: RunnableConfig) -> Iterator[Call]:
    """The target calls that store one checkpoint and its pending writes."""
    source = item.config["configurable"]
    configurable: dict[str, Any] = {
        **held.get("configurable", {}),
        "checkpoint_ns": source.get("checkpoint_ns") or "",
    }
    configurable.pop("checkpoint_id", None)
    parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    at_parent = {**held, "configurable": dict(configurable)}
    if parent:
        at_parent["configurable"] = {**configurable, "checkpoint_id": parent}
    yield ("put", (at_parent, item.checkpoint, item.metadata, {}))
    at_self = {
        **held,
        "configurable": {**configurable, "checkpoint_id": source["checkpoint_id"]},
    }
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in item.pending_writes or []:
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, writes in by_task.items():
        yield ("put_writes", (at_self, writes, task_id, ""))


def import_threads(
    source: BaseCheckpointSaver[Any],
    target: RulvarSaver,
    thread_ids: Sequence[str] | None = None,
) -> list[str]:
    """Copy threads of ``source`` (any LangGraph checkpointer) into ``target``.

    Every checkpoint of every namespace, oldest first, with its metadata,
    parent link and pending writes, written inside a hold of each target
    thread. ``thread_ids`` ``None``: every thread the source lists. Idempotent.
    Returns the thread ids copied.

    Raises:
        LeaseHeldError: another worker holds a target thread (threads before it
            are copied; run again once it is free).
    """
    threads = (
        list(thread_ids) if thread_ids is not None else _thread_ids(source.list(None))
    )
    for thread_id in threads:
        items = _ordered(source.list(_thread_config(thread_id)))
        with target.hold(thread_id) as held:
            for item in items:
                for name, args in _calls(item, held):
                    getattr(target, name)(*args)
    return threads


async def _alisted(
    source: BaseCheckpointSaver[Any], config: RunnableConfig | None
) -> list[CheckpointTuple]:
    listed: AsyncIterator[CheckpointTuple] = source.alist(config)
    return [item async for item in listed]


async def aimport_threads(
    source: BaseCheckpointSaver[Any],
    target: AsyncRulvarSaver,
    thread_ids: Sequence[str] | None = None,
) -> list[str]:
    """The asyncio twin of ``import_threads`` (``source.alist``, ``target.aput``)."""
    threads = (
        list(thread_ids)
        if thread_ids is not None
        else _thread_ids(await _alisted(source, None))
    )
    for thread_id in threads:
        items = _ordered(await _alisted(source, _thread_config(thread_id)))
        async with target.hold(thread_id) as held:
            for item in items:
                for name, args in _calls(item, held):
                    await getattr(target, "a" + name)(*args)
    return threads
