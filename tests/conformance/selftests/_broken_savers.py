"""LangGraph savers with one seeded defect each, for the write-orders suite's self-tests.

Each is ``RulvarSaver`` or ``AsyncRulvarSaver`` with one piece of what a saver
keeps between calls made wrong in a way a real implementation could get it
wrong; everything else is the honest saver over a real store.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from rulvar_conformance.suites.langgraph_orders import Savers
from rulvar_langgraph import AsyncRulvarSaver, RulvarSaver
from rulvar_langgraph._hold_cache import HoldCache, TaskWrites
from rulvar_store import AsyncOpenedStore, Lease, OpenedStore

__all__ = ["BROKEN_SAVERS", "broken_savers"]


class OrderAssumingCache(HoldCache):
    """Issue 39's defect: a checkpoint the hold creates is assumed to have no
    writes unless it is the one remembered (as if writes came after puts)."""

    def new_checkpoint(self, checkpoint_ns: str, checkpoint_id: str) -> None:
        if self.known_writes(checkpoint_ns, checkpoint_id) is None:
            self.writes[checkpoint_ns] = (checkpoint_id, {})


class WrongCheckpointCache(HoldCache):
    """Answers with the namespace's remembered writes whatever checkpoint is asked."""

    def known_writes(self, checkpoint_ns: str, checkpoint_id: str) -> TaskWrites | None:
        known = self.writes.get(checkpoint_ns)
        return None if known is None else known[1]


S = TypeVar("S", RulvarSaver, AsyncRulvarSaver)


def _with_cache(base: type[S], cache: type[HoldCache]) -> type[S]:
    class Broken(base):  # type: ignore[valid-type,misc]  # a class made per defect
        def _hold_begun(
            self, thread_id: str, lease: Lease, config: RunnableConfig | None
        ) -> RunnableConfig:
            held: RunnableConfig = super()._hold_begun(thread_id, lease, config)
            self._caches[lease.run_id] = cache(lease)
            return held

    Broken.__name__ = f"{cache.__name__.removesuffix('Cache')}{base.__name__}"
    return Broken


def _integer_versions(base: type[S]) -> type[S]:
    class Broken(base):  # type: ignore[valid-type,misc]  # a class made per defect
        """Only the base class's integer versions: a stock thread cannot continue."""

        def get_next_version(self, current: Any, channel: None) -> Any:
            return BaseCheckpointSaver.get_next_version(self, current, channel)

    Broken.__name__ = f"IntegerVersions{base.__name__}"
    return Broken


def _kept_across_holds(base: type[S]) -> type[S]:
    class Broken(base):  # type: ignore[valid-type,misc]  # a class made per defect
        """A thread's hold memory outlives the hold and serves the next one."""

        def _hold_begun(
            self, thread_id: str, lease: Lease, config: RunnableConfig | None
        ) -> RunnableConfig:
            held: RunnableConfig = super()._hold_begun(thread_id, lease, config)
            kept: dict[str, HoldCache] = self.__dict__.setdefault("_kept", {})
            previous = kept.get(lease.run_id)
            if previous is not None:
                previous.lease = lease
                self._caches[lease.run_id] = previous
            else:
                kept[lease.run_id] = self._caches[lease.run_id]
            return held

    Broken.__name__ = f"KeptAcrossHolds{base.__name__}"
    return Broken


class UnlockedAsyncRulvarSaver(AsyncRulvarSaver):
    """No per-thread lock: concurrent tasks of one hold race its memory and
    each task's read-modify-write of its writes blob."""

    def _thread_lock(self, run_id: str) -> asyncio.Lock:
        return asyncio.Lock()  # a new one each time: it excludes nobody


def _pair(sync: type[RulvarSaver], asyncio_cls: type[AsyncRulvarSaver]) -> Savers:
    def make_sync(opened: OpenedStore, owner: str) -> Any:
        return sync(opened.journal, opened.transcripts, owner=owner)

    def make_async(opened: AsyncOpenedStore, owner: str) -> Any:
        return asyncio_cls(opened.journal, opened.transcripts, owner=owner)

    return Savers(make_sync, make_async)


BROKEN_SAVERS: dict[str, Savers] = {
    "OrderAssuming": _pair(
        _with_cache(RulvarSaver, OrderAssumingCache),
        _with_cache(AsyncRulvarSaver, OrderAssumingCache),
    ),
    "WrongCheckpoint": _pair(
        _with_cache(RulvarSaver, WrongCheckpointCache),
        _with_cache(AsyncRulvarSaver, WrongCheckpointCache),
    ),
    "IntegerVersions": _pair(
        _integer_versions(RulvarSaver), _integer_versions(AsyncRulvarSaver)
    ),
    "KeptAcrossHolds": _pair(
        _kept_across_holds(RulvarSaver), _kept_across_holds(AsyncRulvarSaver)
    ),
    "UnlockedAsync": _pair(RulvarSaver, UnlockedAsyncRulvarSaver),
}
"""Each seeded defect's savers (sync and asyncio), by name."""


def broken_savers(name: str) -> Savers:
    """The savers with the named defect."""
    return BROKEN_SAVERS[name]
