"""RulvarSaver: a fenced LangGraph checkpointer over the sync store SPI."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from rulvar_langgraph import _plans
from rulvar_langgraph._core import STRIPES, SaverCore
from rulvar_langgraph._layout import run_for_thread
from rulvar_langgraph._plans import Plan, T
from rulvar_langgraph._queued import InFlightWrites
from rulvar_langgraph._telemetry import SAVER_CALLS, traced_saver
from rulvar_store import (
    JournalStore,
    LeaseKeeper,
    OpenedStore,
    TranscriptStore,
    open_store,
)
from rulvar_store.backend import Observed

__all__ = ["RulvarSaver"]


@traced_saver(SAVER_CALLS)
class RulvarSaver(SaverCore, Observed):
    """A LangGraph checkpointer whose writes a superseded worker cannot land.

    Each thread is one run of the store; ``hold`` takes its lease for an
    invocation, and a write outside a hold takes a brief lease of its own.
    The async methods run the sync ones on a worker thread; use
    ``AsyncRulvarSaver`` in asyncio code.
    """

    def __init__(
        self,
        journal: JournalStore,
        transcripts: TranscriptStore,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(journal, transcripts, owner=owner, serde=serde)
        self.journal = journal
        self.transcripts = transcripts
        self._locks = [threading.Lock() for _ in range(STRIPES)]
        flush = getattr(transcripts, "flush_queued", None) if self._queue_puts else None
        self._in_flight = InFlightWrites(flush or _nothing_to_flush)

    @classmethod
    @contextmanager
    def from_url(
        cls,
        url: str,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
        **options: Any,
    ) -> Iterator[RulvarSaver]:
        """Open the store ``url`` names (options as keywords or in the URL); close it at exit."""
        with open_store(url, **options) as opened:
            yield cls(opened.journal, opened.transcripts, owner=owner, serde=serde)

    @classmethod
    def over(
        cls,
        opened: OpenedStore,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
    ) -> RulvarSaver:
        """A saver over an opened store; the caller keeps closing it."""
        return cls(opened.journal, opened.transcripts, owner=owner, serde=serde)

    def _run(self, plan: Plan[T]) -> T:
        return _plans.drive(plan, self.journal, self.transcripts)

    def _thread_lock(self, run_id: str) -> threading.Lock:
        """The lock that serializes this saver's work on ``run_id``'s thread."""
        return self._locks[self._stripe(run_id)]

    def _run_locked(self, run_id: str, plan: Plan[T]) -> T:
        # One saver serializes its own writes per thread: a brief lease would
        # refuse a sibling's concurrent acquire, and put_writes reads then writes
        # (its queued writes land before the thread is read: ``_queued``).
        with self._thread_lock(run_id):
            return _plans.drive(
                plan, self.journal, self.transcripts, self._in_flight.reader(run_id)
            )

    # --- ownership ----------------------------------------------------------------

    @contextmanager
    def hold(
        self, thread_id: str, config: RunnableConfig | None = None
    ) -> Iterator[RunnableConfig]:
        """Own ``thread_id`` for one invocation; yield the config to invoke with.

        Renews every third of the ttl and releases at exit. Once the lease is
        lost (a renewal refused, or none succeeded before expiry), every write
        with this config raises ``LeaseLostError`` before touching the store,
        and ``rulvar_langgraph.ensure_owned(config)`` raises it in nodes.

        Raises:
            LeaseHeldError: another worker holds the thread (``retry_after_ms``
                says when its lease expires unless renewed).
        """
        run_id = run_for_thread(thread_id)
        since = time.monotonic()  # the lease expires ttl after this at the latest
        lease, latest = self._run(
            _plans.acquire_hold(run_id, self.owner, self._prefetch)
        )
        keeper = LeaseKeeper(self.journal.renew, lease, self._ttl_ms, since=since)  # type: ignore[attr-defined]  # check_stores saw leases
        raised: BaseException | None = None
        try:
            yield self._hold_begun(thread_id, lease, config, keeper, latest)
        except BaseException as exc:  # the outcome the hold's end writes: failed
            raised = exc
            raise
        finally:
            release = self._hold_ended(
                lease, raised
            )  # no write joins the hold from here on
            keeper.stop()
            self._run(release)

    # --- BaseCheckpointSaver ----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        locked_run, plan = self._get_plan(config)
        found = (
            self._run(plan)
            if locked_run is None
            else self._run_locked(locked_run, plan)
        )
        return None if found is None else self._tuple(found)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for found in self._run(self._list_plan(config, filter, before, limit)):
            yield self._tuple(found)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._run_locked(*self._put_plan(config, checkpoint, metadata))
        return self._stored_config(config, checkpoint)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_id, plan = self._put_writes_plan(config, writes, task_id, task_path)
        with self._thread_lock(run_id):
            reader = self._in_flight.reader(run_id)
            queued = _plans.drive(plan, self.journal, self.transcripts, reader)
            if queued is None:
                return
            landed = self._in_flight.add(run_id)
        # Awaited outside the thread's lock, so the step's checkpoint,
        # following at once, can share the queued write's COMMIT.
        self._await_queued(run_id, queued, landed)

    def _await_queued(self, run_id: str, queued: Any, landed: Any) -> None:
        """Wait for a queued write of a hold; a failed one is forgotten by its memory."""
        try:
            accompanied = self.transcripts.await_put(queued)  # type: ignore[attr-defined]  # _queue_puts saw it
        except BaseException:
            self._in_flight.done(run_id, landed)
            with self._thread_lock(run_id):
                self._queued_write_failed(run_id)
            raise
        self._in_flight.done(run_id, landed)
        if not accompanied:  # nothing follows this hold's writes: stop waiting
            with self._thread_lock(run_id):
                self._queued_write_alone(run_id)

    def delete_thread(self, thread_id: str) -> None:
        self._run_locked(*self._delete_thread_plan(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return
        runs = self._run(_plans.thread_runs())
        for locked in self._delete_for_runs_plans(run_ids, runs):
            self._run_locked(*locked)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run_locked(*self._copy_plan(source_thread_id, target_thread_id))

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        for locked in self._prune_plans(thread_ids, strategy):
            self._run_locked(*locked)

    # --- async twins: the sync methods on a worker thread --------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(
            self.put, config, checkpoint, metadata, new_versions
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _nothing_to_flush() -> None:
    """The flush of a blob store that queues no writes."""
