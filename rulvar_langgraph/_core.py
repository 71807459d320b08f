"""What both savers share: config parsing, serialization and the striped locks."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from rulvar_langgraph import _plans
from rulvar_langgraph._hold_cache import HoldCache
from rulvar_langgraph._layout import (
    CheckpointRecord,
    StoredWrite,
    run_for_thread,
    thread_for_run,
)
from rulvar_langgraph._outcome import HoldNotes
from rulvar_langgraph._plans import Found, Plan, T
from rulvar_store import (
    AsyncLeaseKeeper,
    ConfigError,
    InvalidArgumentError,
    Lease,
    LeaseKeeper,
    has_fenced_writes,
    has_meta_lookup,
)
from rulvar_store.backend import has_get_under, has_last_ref

Owned = LeaseKeeper | AsyncLeaseKeeper

__all__ = [
    "HOLDER_KEY",
    "HOLD_KEY",
    "LEASE_KEY",
    "STRIPES",
    "Locked",
    "SaverCore",
    "check_stores",
    "held_config",
    "next_version",
    "renew_interval_s",
]

LEASE_KEY: Final = "__rulvar_lease__"
"""The configurable key a hold's config carries its lease under.

LangGraph copies it into the config of every checkpoint write of the root graph
and its subgraphs, and leaves ``__``-prefixed keys out of stored metadata.
"""

HOLDER_KEY: Final = "__rulvar_holder__"
"""The configurable key naming the saver object whose hold made the config.

A hold remembers what it wrote (G14), which is sound only while every write
under its lease goes through its own saver; another saver object refuses the
config rather than write behind that memory.
"""

HOLD_KEY: Final = "__rulvar_hold__"
"""The configurable key a hold's config carries its lease keeper under.

Nodes and tools read it through ``rulvar_langgraph.ensure_owned(config)``
before a side effect, and the saver before every write of the hold (L10).
"""

Locked = tuple[str, Plan[None]]
"""A write's plan and the run whose stripe lock it runs under."""

STRIPES: Final = 64
"""Per-thread locks are striped: memory stays flat however many threads a saver touches."""


def held_config(
    thread_id: str,
    lease: Lease,
    config: RunnableConfig | None,
    holder: str,
    keeper: Owned | None = None,
) -> RunnableConfig:
    """The caller's config with the thread, the lease every checkpoint write carries,
    the ``holder`` token of the saver that made the hold and the hold's keeper."""
    base: dict[str, Any] = dict(config or {})
    base["configurable"] = {
        **(base.get("configurable") or {}),
        "thread_id": thread_id,
        LEASE_KEY: lease,
        HOLDER_KEY: holder,
        **({} if keeper is None else {HOLD_KEY: keeper}),
    }
    return base  # type: ignore[return-value]  # RunnableConfig is a total=False TypedDict


def check_stores(journal: object, blobs: object) -> None:
    """Require what fencing a thread needs: leases, meta lookup, fenced journal and blobs.

    Raises:
        ConfigError: naming what the stores lack.
    """
    missing = [
        what
        for what, ok in (
            (
                "leases (acquire/renew/release)",
                callable(getattr(journal, "acquire", None)),
            ),
            ("meta lookup (get_meta)", has_meta_lookup(journal)),
            ("fenced writes on the journal", has_fenced_writes(journal)),
            ("fenced writes on the blob twin", has_fenced_writes(blobs)),
        )
        if not ok
    ]
    if missing:
        raise ConfigError(
            "a rulvar LangGraph saver needs a store with "
            + ", ".join(missing)
            + f"; {type(journal).__name__} lacks them"
        )


def renew_interval_s(journal: object) -> float:
    """A third of the store's lease ttl (L8), in seconds.

    Sync stores expose ``lease_ttl_ms`` (L9); the generic asyncio adapter keeps
    the sync store it serves as ``sync_store``.

    Raises:
        ConfigError: the store tells no ttl, so a hold could not be kept alive.
    """
    for store in (journal, getattr(journal, "sync_store", None)):
        ttl_ms = getattr(store, "lease_ttl_ms", None)
        if isinstance(ttl_ms, int) and not isinstance(ttl_ms, bool):
            return ttl_ms / 3000
    raise ConfigError(
        f"{type(journal).__name__} does not expose lease_ttl_ms: a hold cannot "
        "be renewed at a third of a ttl it does not know"
    )


def next_version(current: int | float | str | None) -> int | float | str:
    """The version after ``current``, in the thread's own kind (G16).

    LangGraph computes one next version per step from the greatest version of
    all the checkpoint's channels, so a thread's versions are all numbers or all
    strings. A new thread gets the base class's integer 1. LangGraph's stock
    savers write ``f"{counter:032}.{random:016}"``: the next is the same format
    with the counter one up. The random part exists there because those savers
    store channel values keyed by version, where two forks of one thread would
    otherwise share a key; here a checkpoint holds its channel values inline,
    never keyed by version, so a fixed part is as sound and keeps a replayed
    step's checkpoint byte for byte the same. The counter alone orders versions
    (a fixed-width prefix), so ours sort after the stock saver's.

    Raises:
        InvalidArgumentError: a string version without a counter before its dot.
    """
    if isinstance(current, str):
        head = current.split(".", 1)[0]
        if not head.isdigit():
            raise InvalidArgumentError(
                f"channel version {current[:60]!r} is no '<counter>.<suffix>' "
                "string of LangGraph's savers; cannot tell the next one",
                "checkpoint",
                "channel_versions",
            )
        return f"{int(head) + 1:032}.{0:016}"
    if current is None:
        return 1
    return current + 1


class SaverCore(BaseCheckpointSaver[Any]):
    """Config parsing, store checks, hold bookkeeping and (de)serialization, free of I/O."""

    owner: str

    def __init__(
        self,
        journal: object,
        transcripts: object,
        *,
        owner: str,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(owner, str) or not owner:
            raise ConfigError(f"owner must be a non-empty string, got {owner!r}")
        self.owner = owner
        self._check_api(journal, transcripts)
        check_stores(journal, transcripts)
        self._renew_every_s = renew_interval_s(journal)
        self._ttl_ms = round(self._renew_every_s * 3000)
        # The newest checkpoint by last_ref (T12) where the blob store has it,
        # else from the thread's listing.
        self._indexed = has_last_ref(transcripts)
        # A checkpoint and its writes in one read by get_under (T13) where the
        # blob store has it, else a get and the thread's listing.
        self._whole = has_get_under(transcripts)
        # A thread's first checkpoint with its meta, and a hold's outcome with
        # its release, each in one transaction where the journal fuses them.
        # Only over the journal's own blob twin: a fused put writes the blob
        # through the journal, so another blob store would be bypassed.
        twin = getattr(journal, "transcripts", None)
        self._fused = (
            all(
                callable(getattr(journal, name, None))
                for name in ("put_meta_and_release", "put_with_meta")
            )
            and callable(twin)
            and twin() is transcripts
        )
        # An unheld put as ONE store call (the journal's brief_put, L16), over
        # the journal's own blob twin for the same reason.
        self._brief_put = (
            callable(getattr(journal, "brief_put", None))
            and callable(twin)
            and twin() is transcripts
        )
        # A hold's task writes queued to share the COMMIT of the step's
        # checkpoint that follows them, where the blob store queues writes
        # (``queue_put``: SQLite and PostgreSQL, sync and asyncio).
        self._queue_puts = all(
            callable(getattr(transcripts, name, None))
            for name in ("queue_put", "await_put", "flush_queued")
        )
        # A hold's acquire and its first read (the root namespace's newest
        # checkpoint) in one round trip where the journal offers it.
        self._prefetch = (
            callable(getattr(journal, "acquire_with_last_ref", None))
            and callable(twin)
            and twin() is transcripts
        )
        # The leases of this saver's open holds, by run, and what each hold
        # knows of its thread: bounded by the holds open at once, never by the
        # threads the saver has touched.
        self._holding: dict[str, Lease] = {}
        self._keepers: dict[str, Owned] = {}
        self._caches: dict[str, HoldCache] = {}
        self._notes: dict[str, HoldNotes] = {}
        self._holder = secrets.token_hex(8)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The next channel version: integers, or the stock savers' strings (``next_version``)."""
        return next_version(current)

    def _check_api(self, journal: object, transcripts: object) -> None:
        """Refuse stores of the other API (sync or asyncio); the savers say which."""

    def _lease(self, run_id: str, config: RunnableConfig) -> Lease | None:
        """The config's lease, else this saver's open hold of the thread, else none.

        Raises:
            InvalidArgumentError: the config comes from a hold of another saver
                object (its memory would miss this write).
        """
        holder = (config.get("configurable") or {}).get(HOLDER_KEY)
        if holder is not None and holder != self._holder:
            raise InvalidArgumentError(
                "this config comes from a hold made by another saver object; write "
                "through the saver that made the hold (or take a hold of this one)",
                "checkpoint",
                "config",
            )
        # L10: a hold whose lease is lost refuses the write before any I/O.
        keeper = (config.get("configurable") or {}).get(HOLD_KEY)
        if keeper is None:
            keeper = self._keepers.get(run_id)
        if isinstance(keeper, LeaseKeeper | AsyncLeaseKeeper):
            keeper.ensure_owned()
        return self._held(config) or self._holding.get(run_id)

    def _cache(self, run_id: str, lease: Lease | None) -> HoldCache | None:
        """The memory of this saver's hold of the thread, if ``lease`` is that hold's."""
        cache = self._caches.get(run_id)
        return cache if cache is not None and cache.lease == lease else None

    def _queued_write_failed(self, run_id: str) -> None:
        """A queued write of the thread's hold failed: its memory counted it landed.

        Called under the thread's lock.
        """
        cache = self._caches.get(run_id)
        if cache is not None:
            cache.clear()

    def _queued_write_alone(self, run_id: str) -> None:
        """A queued write waited in vain: the hold writes the rest at once.

        Called under the thread's lock.
        """
        cache = self._caches.get(run_id)
        if cache is not None:
            cache.queue_writes = False

    def _forgetting(self, run_id: str | None, plan: Plan[T]) -> Plan[T]:
        """Run ``plan``, then clear the holds' memory of ``run_id`` (``None``: every run).

        Cleared when the plan ends, inside the thread's lock, so no put that
        read the memory before the change can refill it with a stale value.
        """
        try:
            return (yield from plan)
        finally:
            for run, cache in self._caches.items():
                if run_id is None or run == run_id:
                    cache.clear()

    # --- holds (the I/O, acquire, renewals and release, is each saver's own) -------

    def _hold_begun(
        self,
        thread_id: str,
        lease: Lease,
        config: RunnableConfig | None,
        keeper: Owned | None = None,
        latest: str | None = None,
    ) -> RunnableConfig:
        """Record the hold's lease; return the config its invocation writes with.

        ``latest``: what the acquire learned of the root namespace's newest
        checkpoint (``_plans.acquire_hold``), if anything.
        """
        self._holding[lease.run_id] = lease
        cache = self._caches[lease.run_id] = HoldCache(lease)
        if latest is not None:
            cache.latest[""] = latest
        self._notes[lease.run_id] = HoldNotes()
        if keeper is not None:
            self._keepers[lease.run_id] = keeper
        return held_config(thread_id, lease, config, self._holder, keeper)

    def _hold_ended(
        self, lease: Lease, raised: BaseException | None = None
    ) -> Plan[None]:
        """Forget the hold's lease; return the plan that writes its outcome and releases.

        ``raised`` is what the hold's body raised, if anything (its outcome is
        then ``failed``).
        """
        del self._holding[lease.run_id]
        cache = self._caches.pop(lease.run_id)
        self._keepers.pop(lease.run_id, None)
        notes = self._notes.pop(lease.run_id)
        return _plans.ended(lease, notes.outcome(raised), self._fused, cache.meta)

    def _noting(
        self,
        run_id: str,
        ns: str,
        lease: Lease | None,
        note: Callable[[HoldNotes], None],
    ) -> Callable[[Plan[T]], Plan[T]]:
        """Wrap a root-namespace write of this saver's hold so its notes learn of it once it landed.

        A queued write (``_plans.put_writes``) is noted once queued: if it then
        fails, its error reaches the invocation, whose outcome is then failed.
        """
        notes = self._notes.get(run_id)
        if ns != "" or notes is None or lease != self._holding.get(run_id):
            return lambda plan: plan

        def noted(plan: Plan[T]) -> Plan[T]:
            result = yield from plan
            note(notes)
            return result

        return noted

    # --- config ---------------------------------------------------------------

    @staticmethod
    def _configurable(config: RunnableConfig) -> dict[str, Any]:
        configurable = config.get("configurable")
        if not isinstance(configurable, dict) or "thread_id" not in configurable:
            raise InvalidArgumentError(
                "config['configurable']['thread_id'] is required",
                "checkpoint",
                "config",
            )
        return configurable

    def _address(self, config: RunnableConfig) -> tuple[str, str, str | None]:
        configurable = self._configurable(config)
        checkpoint_ns = configurable.get("checkpoint_ns") or ""
        return (
            run_for_thread(configurable["thread_id"]),
            checkpoint_ns,
            get_checkpoint_id(config),
        )

    @staticmethod
    def _held(config: RunnableConfig) -> Lease | None:
        lease = (config.get("configurable") or {}).get(LEASE_KEY)
        if lease is not None and not isinstance(lease, Lease):
            raise InvalidArgumentError(
                f"{LEASE_KEY} must be a rulvar Lease, got {type(lease).__name__}",
                "checkpoint",
                "config",
            )
        return lease

    @staticmethod
    def _strategy(strategy: str) -> str:
        if strategy not in ("keep_latest", "delete"):
            raise InvalidArgumentError(
                f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}",
                "prune",
                "strategy",
            )
        return strategy

    @staticmethod
    def _stripe(run_id: str) -> int:
        return hash(run_id) % STRIPES

    # --- the plan of each operation (run by the sync or async driver) -----------------

    def _get_plan(
        self, config: RunnableConfig
    ) -> tuple[str | None, Plan[Found | None]]:
        """The read's plan, and the run whose lock it takes (a held read only).

        A read through this saver's hold uses and fills the hold's memory, so it
        runs inside the thread's lock like the hold's writes. Any config may read,
        another saver's hold's included (it changes nothing).
        """
        run_id, ns, checkpoint_id = self._address(config)
        lease = self._held(config) or self._holding.get(run_id)
        cache = self._cache(run_id, lease)
        plan = _plans.get_tuple(
            run_id, ns, checkpoint_id, cache, self._indexed, self._whole
        )
        return (None if cache is None else run_id), plan

    def _list_plan(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Plan[list[Found]]:
        return _plans.list_checkpoints(
            *self._list_args(config, before), self._keep(filter), limit, self._whole
        )

    def _put_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> Locked:
        run_id, ns, _ = self._address(config)
        record = self._record(config, checkpoint, metadata)
        lease = self._lease(run_id, config)
        checkpoint_id = checkpoint["id"]
        noted = self._noting(
            run_id,
            ns,
            lease,
            lambda notes: notes.put(checkpoint_id, checkpoint),  # type: ignore[arg-type]  # a Checkpoint is a dict
        )
        return run_id, noted(
            _plans.put(
                run_id,
                ns,
                checkpoint_id,
                record,
                lease,
                self.owner,
                self._cache(run_id, lease),
                self._indexed,
                self._fused,
                self._brief_put,
            )
        )

    def _put_writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[str, Plan[Any]]:
        run_id, ns, checkpoint_id = self._address(config)
        stored = self._writes(writes, task_id, task_path)
        lease = self._lease(run_id, config)
        plan = _plans.put_writes(
            run_id,
            ns,
            str(checkpoint_id),
            task_id,
            stored,
            lease,
            self.owner,
            self._cache(run_id, lease),
            self._whole,
            self._queue_puts,
        )
        channels = [channel for channel, _ in writes]
        noted = self._noting(
            run_id, ns, lease, lambda notes: notes.writes(str(checkpoint_id), channels)
        )
        return run_id, noted(plan)

    def _delete_thread_plan(self, thread_id: str) -> Locked:
        run_id = run_for_thread(thread_id)
        plan = _plans.delete_thread(run_id, self._holding.get(run_id), self.owner)
        return run_id, self._forgetting(run_id, plan)

    def _delete_for_runs_plans(
        self, run_ids: Sequence[str], runs: Sequence[str]
    ) -> Iterator[Locked]:
        """One plan per thread, each run under its thread's lock (``delete_for_run``)."""
        for run in runs:
            plan = _plans.delete_for_run(
                run, run_ids, self._metadata_run_id, self._holding.get(run), self.owner
            )
            yield run, self._forgetting(run, plan)

    def _copy_plan(self, source_thread_id: str, target_thread_id: str) -> Locked:
        source, target = (
            run_for_thread(source_thread_id),
            run_for_thread(target_thread_id),
        )
        held = self._holding.get(target)
        plan = _plans.copy_thread(source, target, held, self.owner)
        return target, self._forgetting(target, plan)

    def _prune_plans(
        self, thread_ids: Sequence[str], strategy: str
    ) -> Iterator[Locked]:
        strategy = self._strategy(strategy)
        for thread_id in thread_ids:
            run_id = run_for_thread(thread_id)
            plan = _plans.prune(run_id, strategy, self._holding.get(run_id), self.owner)
            yield run_id, self._forgetting(run_id, plan)

    # --- serialization ----------------------------------------------------------

    def _record(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> CheckpointRecord:
        return CheckpointRecord(
            self.serde.dumps_typed(checkpoint),
            self.serde.dumps_typed(get_checkpoint_metadata(config, metadata)),
            get_checkpoint_id(config),
        )

    def _writes(
        self, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> list[StoredWrite]:
        return [
            StoredWrite(
                task_id,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                self.serde.dumps_typed(value),
                task_path,
            )
            for idx, (channel, value) in enumerate(writes)
        ]

    def _metadata(self, record: CheckpointRecord) -> dict[str, Any]:
        metadata: dict[str, Any] = self.serde.loads_typed(record.metadata)
        return metadata

    def _metadata_run_id(self, record: CheckpointRecord) -> object:
        return self._metadata(record).get("run_id")

    def _keep(self, filter: dict[str, Any] | None) -> Any:
        def keep(record: CheckpointRecord) -> bool:
            if not filter:
                return True
            metadata = self._metadata(record)
            return all(metadata.get(key) == value for key, value in filter.items())

        return keep

    def _tuple(self, found: Found) -> CheckpointTuple:
        thread_id = thread_for_run(found.run_id)
        writes = sorted(found.writes, key=lambda w: (w.task_path, w.task_id, w.idx))
        parent = found.record.parent_id
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": found.checkpoint_ns,
                    "checkpoint_id": found.checkpoint_id,
                }
            },
            checkpoint=self.serde.loads_typed(found.record.checkpoint),
            metadata=self._metadata(found.record),  # type: ignore[arg-type]  # a stored CheckpointMetadata
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": found.checkpoint_ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed(w.value)) for w in writes
            ],
        )

    @staticmethod
    def _stored_config(
        config: RunnableConfig, checkpoint: Checkpoint
    ) -> RunnableConfig:
        configurable = config["configurable"]  # checked by _address
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns") or "",
                "checkpoint_id": checkpoint["id"],
            }
        }

    @staticmethod
    def _list_args(
        config: RunnableConfig | None, before: RunnableConfig | None
    ) -> tuple[str | None, str | None, str | None, str | None]:
        run_id = ns = checkpoint_id = None
        if config is not None:
            configurable = config.get("configurable") or {}
            if "thread_id" in configurable:
                run_id = run_for_thread(configurable["thread_id"])
            ns = configurable.get("checkpoint_ns")
            checkpoint_id = get_checkpoint_id(config) if configurable else None
        before_id = get_checkpoint_id(before) if before else None
        return run_id, ns, checkpoint_id, before_id
