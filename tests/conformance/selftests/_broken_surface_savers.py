"""Broken LangGraph savers for the langgraph suite's surface checks (G1, G5, G8, G10, G27-G29).

Each is the real ``RulvarSaver`` with one plausible slip, as a subclass the
surface checks take as their ``saver_type`` (``MetaOutsideLease`` puts its
slip in the journal it is given: the thread's run meta goes out unfenced).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from rulvar_langgraph import LEASE_KEY, AsyncRulvarSaver, RulvarSaver, ThreadGoneError
from rulvar_store import Lease, LeaseHeldError, RulvarError

__all__ = [
    "AsyncListIgnoresBefore",
    "CurrentLayoutDelete",
    "FilterAfterLimit",
    "FreshStartOnGone",
    "HoldReleasedAtOnce",
    "ListingLatest",
    "MetaOutsideLease",
    "OrderedByTaskId",
    "PruneKeepsBlobs",
    "RetakingHold",
    "RetryOnRefusal",
    "SpecialWritesKeepFirst",
    "SubgraphOutsideLease",
    "UnfencedDeleteThread",
]


class FilterAfterLimit(RulvarSaver):
    """``list`` takes the ``limit`` newest checkpoints, then filters them."""

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for item in super().list(config, before=before, limit=limit):
            if not filter or all(item.metadata.get(k) == v for k, v in filter.items()):
                yield item


class SpecialWritesKeepFirst(RulvarSaver):
    """A task's repeated write to any channel is ignored, special channels too."""

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        found = self.get_tuple(config)
        seen = {(t, c) for t, c, _ in (found.pending_writes or [])} if found else set()
        kept = [(c, v) for c, v in writes if (task_id, c) not in seen]
        super().put_writes(config, kept, task_id, task_path)


class OrderedByTaskId(RulvarSaver):
    """Pending writes ordered by task id alone (the task path forgotten)."""

    def _tuple(self, found: Any) -> CheckpointTuple:
        item = super()._tuple(found)
        pending = sorted(item.pending_writes or [], key=lambda w: w[0])
        return item._replace(pending_writes=pending)


class _UnleasedMeta:
    """The saver's journal, but ``put_meta`` drops the lease it was given."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("put_with_meta", "put_meta_and_release"):
            # Not the fused writes (SQLite's): the meta goes through put_meta.
            raise AttributeError(name)
        return getattr(self._inner, name)

    def put_meta(self, meta: Any, lease: Lease | None = None) -> None:
        # The bug: "the thread's run meta is only bookkeeping" - written unfenced.
        self._inner.put_meta(meta, None)


class MetaOutsideLease(RulvarSaver):
    """Writes the thread's run meta (its first checkpoint's) outside the lease."""

    def __init__(self, journal: Any, transcripts: Any, **kwargs: Any) -> None:
        super().__init__(_UnleasedMeta(journal), transcripts, **kwargs)


class CurrentLayoutDelete(RulvarSaver):
    """``delete_thread`` deletes the blobs of today's layout only (``<run>/c/<ns>/<id>/...``)."""

    def delete_thread(self, thread_id: str) -> None:
        journal: Any = self.journal
        lease = journal.acquire(thread_id, self.owner)
        for ref in self.transcripts.list_refs(thread_id):
            parts = ref.split("/")
            if parts[1] == "c" and len(parts) > 4:
                self.transcripts.delete(ref, lease)
        journal.delete(thread_id, lease)


class _RetakingRenewer:
    """Renews every ``interval_s``; a refused renewal acquires the thread again."""

    def __init__(self, journal: Any, lease: Lease, interval_s: float) -> None:
        self._journal = journal
        self._lease = lease
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._journal.renew(self._lease)
            except RulvarError:
                # The bug: "the lease lapsed, take it back so the run goes on".
                try:
                    self._lease = self._journal.acquire(
                        self._lease.run_id, self._lease.owner
                    )
                except RulvarError:
                    continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        with suppress(RulvarError):
            self._journal.release(self._lease)


class RetakingHold(RulvarSaver):
    """A hold whose renewer re-acquires the thread after a refused renewal."""

    @contextmanager
    def hold(
        self, thread_id: str, config: RunnableConfig | None = None
    ) -> Iterator[RunnableConfig]:
        journal: Any = self.journal
        lease = journal.acquire(thread_id, self.owner)
        renewer = _RetakingRenewer(journal, lease, self._renew_every_s)
        try:
            yield self._hold_begun(thread_id, lease, config)
        finally:
            release = self._hold_ended(lease)
            self._run(release)  # refused when lost: kept quiet below
            renewer.stop()


# -- broken savers of the ownership checks (G1-G3, G5-G10, G12, G13) ----------------


class UnfencedDeleteThread(RulvarSaver):
    """``delete_thread`` deletes without any lease ("a delete needs no fence")."""

    def delete_thread(self, thread_id: str) -> None:
        journal: Any = self.journal
        for ref in self.transcripts.list_refs(thread_id):
            self.transcripts.delete(ref)
        journal.delete(thread_id)


class RetryOnRefusal(RulvarSaver):
    """A refused put is retried under a fresh hold ("the lease lapsed; take it again")."""

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        except LeaseHeldError:
            thread = config["configurable"]["thread_id"]
            with self.hold(thread, config) as fresh:
                return super().put(fresh, checkpoint, metadata, new_versions)


class HoldReleasedAtOnce(RulvarSaver):
    """``hold`` gives its lease back as soon as it is taken ("it only guards the start")."""

    @contextmanager
    def hold(
        self, thread_id: str, config: RunnableConfig | None = None
    ) -> Iterator[RunnableConfig]:
        with super().hold(thread_id, config) as held:
            journal: Any = self.journal
            journal.release(held["configurable"][LEASE_KEY])
            yield held


class _UnfencedSubgraphBlobs:
    """The saver's blob store, but a subgraph namespace's blobs go out unfenced."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def put(self, ref: str, blob: Any, lease: Lease | None = None) -> None:
        parts = ref.split("/")
        # The bug: only the root graph's namespace ("") carries the hold's lease.
        self._inner.put(ref, blob, lease if len(parts) < 3 or parts[2] == "" else None)


class SubgraphOutsideLease(RulvarSaver):
    """A subgraph's checkpoints and writes are stored without the hold's lease."""

    def __init__(self, journal: Any, transcripts: Any, **kwargs: Any) -> None:
        super().__init__(journal, _UnfencedSubgraphBlobs(transcripts), **kwargs)


class FreshStartOnGone(RulvarSaver):
    """An unheld put into a deleted thread starts it afresh instead of refusing."""

    def put(
        self, config: RunnableConfig, checkpoint: Any, metadata: Any, new_versions: Any
    ) -> RunnableConfig:
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        except ThreadGoneError:
            configurable = dict(config["configurable"])
            configurable.pop("checkpoint_id", None)
            fresh: Any = {**config, "configurable": configurable}
            return super().put(fresh, checkpoint, metadata, new_versions)


class ListingLatest(RulvarSaver):
    """The latest checkpoint is found by listing the thread ("list is sorted anyway")."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if config["configurable"].get("checkpoint_id"):
            return super().get_tuple(config)
        for item in self.list(config, limit=1):
            return item
        return None


class PruneKeepsBlobs(RulvarSaver):
    """``delete_for_runs`` and ``prune`` drop nothing ("space is cheap")."""

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return None

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        return None


class AsyncListIgnoresBefore(AsyncRulvarSaver):
    """``alist(before=...)`` lists from the newest checkpoint all the same."""

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in super().alist(config, filter=filter, limit=limit):
            yield item
