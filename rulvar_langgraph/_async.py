"""AsyncRulvarSaver: the fenced checkpointer over the asyncio store SPI."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
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
from rulvar_langgraph._hold import CancelOnLoss
from rulvar_langgraph._layout import run_for_thread
from rulvar_langgraph._plans import Plan, T
from rulvar_langgraph._queued import InFlightWrites
from rulvar_langgraph._telemetry import ASYNC_SAVER_CALLS, traced_saver
from rulvar_store import (
    AsyncJournalStore,
    AsyncLeaseKeeper,
    AsyncOpenedStore,
    AsyncTranscriptStore,
    ConfigError,
    is_async_store,
    open_store_async,
)
from rulvar_store.backend import Observed

__all__ = ["AsyncRulvarSaver"]


@traced_saver(ASYNC_SAVER_CALLS)
class AsyncRulvarSaver(SaverCore, Observed):
    """The asyncio LangGraph checkpointer: same mapping and fencing as ``RulvarSaver``.

    The sync methods work from threads other than the saver's event loop,
    which they call into (as LangGraph's own async savers do).
    """

    def __init__(
        self,
        journal: AsyncJournalStore,
        transcripts: AsyncTranscriptStore,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(journal, transcripts, owner=owner, serde=serde)
        # Typed Any: check_stores saw acquire/renew/release and get_meta, which
        # the base async protocol does not name.
        self.journal: Any = journal
        self.transcripts = transcripts
        self._locks = [asyncio.Lock() for _ in range(STRIPES)]
        self.loop = asyncio.get_running_loop()
        flush = getattr(transcripts, "flush_queued", None) if self._queue_puts else None
        self._in_flight = InFlightWrites(flush or _nothing_to_flush, asyncio_saver=True)

    def _check_api(self, journal: object, transcripts: object) -> None:
        if not (is_async_store(journal) and is_async_store(transcripts)):
            raise ConfigError(
                "AsyncRulvarSaver needs asyncio stores (open_store_async); "
                "use RulvarSaver over sync ones"
            )

    @classmethod
    @asynccontextmanager
    async def from_url(
        cls,
        url: str,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncRulvarSaver]:
        """Open the store ``url`` names (options as keywords or in the URL); close it at exit."""
        async with open_store_async(url, **options) as opened:
            yield cls.over(opened, owner=owner, serde=serde)

    @classmethod
    def over(
        cls,
        opened: AsyncOpenedStore,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
    ) -> AsyncRulvarSaver:
        """A saver over an opened asyncio store; the caller keeps closing it."""
        return cls(opened.journal, opened.transcripts, owner=owner, serde=serde)

    async def _run(self, plan: Plan[T]) -> T:
        return await _plans.adrive(plan, self.journal, self.transcripts)

    def _thread_lock(self, run_id: str) -> asyncio.Lock:
        """The lock that serializes this saver's work on ``run_id``'s thread."""
        return self._locks[self._stripe(run_id)]

    async def _run_locked(self, run_id: str, plan: Plan[T]) -> T:
        # Its queued writes land before the thread is read (``_queued``).
        async with self._thread_lock(run_id):
            return await _plans.adrive(
                plan, self.journal, self.transcripts, self._in_flight.areader(run_id)
            )

    # --- ownership ----------------------------------------------------------------

    @asynccontextmanager
    async def hold(
        self, thread_id: str, config: RunnableConfig | None = None
    ) -> AsyncIterator[RunnableConfig]:
        """Own ``thread_id`` for one invocation; yield the config to invoke with.

        Renews every third of the ttl and releases at exit. Once the lease is
        lost (a renewal refused, or none succeeded before expiry), the task that
        entered the hold is cancelled, and the hold raises ``LeaseLostError``
        in place of that cancellation; every write with this config raises it
        too, before touching the store.

        Raises:
            LeaseHeldError: another worker holds the thread (``retry_after_ms``
                says when its lease expires unless renewed).
            LeaseLostError: the lease was lost during the invocation.
        """
        run_id = run_for_thread(thread_id)
        since = time.monotonic()  # the lease expires ttl after this at the latest
        lease, latest = await self._run(
            _plans.acquire_hold(run_id, self.owner, self._prefetch)
        )
        cancel = CancelOnLoss()
        keeper = AsyncLeaseKeeper(
            self.journal.renew, lease, self._ttl_ms, on_lost=cancel, since=since
        )
        finished = False
        raised: BaseException | None = None
        try:
            try:
                yield self._hold_begun(thread_id, lease, config, keeper, latest)
                finished = True
            except BaseException as exc:  # the outcome the hold's end writes: failed
                raised = exc
                raise
            finally:
                release = self._hold_ended(
                    lease, raised
                )  # no write joins the hold from here on
                await keeper.stop()  # no loss is told from here on
                await self._run(release)
                if cancel.fired:
                    await asyncio.sleep(0)  # our cancel lands here, not in the caller
        except asyncio.CancelledError:
            lost = cancel.translate(keeper.lost)
            if lost is None:
                raise  # a cancellation from elsewhere
            if not finished:
                raise lost from None
            # The loss came after the invocation had ended: nothing left to stop.

    # --- BaseCheckpointSaver, async -------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        locked_run, plan = self._get_plan(config)
        found = await (
            self._run(plan)
            if locked_run is None
            else self._run_locked(locked_run, plan)
        )
        return None if found is None else self._tuple(found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._run(self._list_plan(config, filter, before, limit)):
            yield self._tuple(found)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self._run_locked(*self._put_plan(config, checkpoint, metadata))
        return self._stored_config(config, checkpoint)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_id, plan = self._put_writes_plan(config, writes, task_id, task_path)
        async with self._thread_lock(run_id):
            reader = self._in_flight.areader(run_id)
            queued = await _plans.adrive(plan, self.journal, self.transcripts, reader)
            if queued is None:
                return
            landed = self._in_flight.add(run_id)
        # Awaited outside the thread's lock, so the step's checkpoint,
        # following at once, can carry the queued write.
        await self._await_queued(run_id, queued, landed)

    async def _await_queued(self, run_id: str, queued: Any, landed: Any) -> None:
        """Await a queued write of a hold; a failed one is forgotten by its memory."""
        try:
            accompanied = await self.transcripts.await_put(queued)  # type: ignore[attr-defined]  # _queue_puts saw it
        except BaseException:
            self._in_flight.done(run_id, landed)
            async with self._thread_lock(run_id):
                self._queued_write_failed(run_id)
            raise
        self._in_flight.done(run_id, landed)
        if not accompanied:  # nothing follows this hold's writes: stop waiting
            async with self._thread_lock(run_id):
                self._queued_write_alone(run_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run_locked(*self._delete_thread_plan(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        if not run_ids:
            return
        runs = await self._run(_plans.thread_runs())
        for locked in self._delete_for_runs_plans(run_ids, runs):
            await self._run_locked(*locked)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run_locked(*self._copy_plan(source_thread_id, target_thread_id))

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        for locked in self._prune_plans(thread_ids, strategy):
            await self._run_locked(*locked)

    # --- sync twins: call into the saver's loop from another thread --------------------------

    def _call(self, coro: Any) -> Any:
        try:
            if asyncio.get_running_loop() is self.loop:
                coro.close()
                raise asyncio.InvalidStateError(
                    "AsyncRulvarSaver's sync methods cannot run on its own event loop; "
                    "await the a-prefixed method instead"
                )
        except RuntimeError:
            pass  # no loop in this thread: the normal case for a sync caller
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = self._call(self.aget_tuple(config))
        return result

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [
                item
                async for item in self.alist(
                    config, filter=filter, before=before, limit=limit
                )
            ]

        yield from self._call(collect())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        result: RunnableConfig = self._call(
            self.aput(config, checkpoint, metadata, new_versions)
        )
        return result

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._call(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        self._call(self.aprune(thread_ids, strategy=strategy))


async def _nothing_to_flush() -> None:
    """The flush of a blob store that queues no writes."""
