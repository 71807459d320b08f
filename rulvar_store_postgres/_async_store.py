"""AsyncPostgresStore: the PostgresStore for asyncio callers, on psycopg's async pool.

The same plans (``_plans``: intake, SQL, row decoding, verdicts), the same
translation of driver errors (``_errors``), the same one-statement transaction
per mutation (``_transaction``) and the same server clock, bounded waits and
pool settings as the sync store; only the I/O is awaited. No lock serializes
the pool: concurrent tasks run on concurrent connections, one round trip each.

Cancellation: every call runs to its end in the caller's task, which a cancel
cannot interrupt part way (``_uncancelled``). A caller cancelled mid-call stays
in the call until it ends (every call is bounded: lock, connect and
idle-in-transaction timeouts), then gets ``CancelledError``: the one statement
has committed or not as a whole and the connection is back in the pool outside
any transaction. For the caller the outcome of a cancelled write is
unknown, exactly as after a connection lost once COMMIT was sent: read the
run back (or retry: the fence refuses a superseded epoch, and the seq guard
refuses an append whose seq is already stored).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from contextlib import suppress
from functools import partial
from typing import Any, Literal, TypeVar, final

from rulvar_store import (
    BlobBatch,
    BlobInput,
    JournalEntry,
    JournalTail,
    Lease,
    RunFilter,
    RunMeta,
)
from rulvar_store.backend import AsyncClosing, Observed, instrumented
from rulvar_store.errors import (
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)
from rulvar_store.ops import LeaseState
from rulvar_store_postgres._acquire_read import acquire_with_last_ref_async
from rulvar_store_postgres._async_pool import AsyncConn, make_async_pool
from rulvar_store_postgres._brief import OPERATION as OPERATION_BRIEF
from rulvar_store_postgres._brief import (
    AsyncBriefWork,
    Frame,
    WorkStarted,
    run_brief_async,
)
from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._errors import mutation_result, translated
from rulvar_store_postgres._get_under import get_under_step
from rulvar_store_postgres._handle import PostgresHandle
from rulvar_store_postgres._interrupts import interrupts_deferred
from rulvar_store_postgres._last_ref import alearn_collation, last_ref_step
from rulvar_store_postgres._liveness import liveness_key_async
from rulvar_store_postgres._plans import READ_ROWS, Step
from rulvar_store_postgres._queued import (
    QueuedPut,
    QueuedPuts,
    acarried,
    by_lease,
    last_writes,
)
from rulvar_store_postgres._reads import awarm_reads, read_prepared_async
from rulvar_store_postgres._telemetry_target import pool_figures, postgres_target
from rulvar_store_postgres._transaction import hit_off_loop, run_mutation_async
from rulvar_store_postgres._transcripts import QUEUE_LINGER_S, put_many_step
from rulvar_store_postgres._uncancelled import Uncancelled

__all__ = ["AsyncPostgresFencedTranscriptStore", "AsyncPostgresStore"]

T = TypeVar("T")


@final
@instrumented(
    lambda store: postgres_target(store._settings.conninfo, store.schema),
    role="journal",
)
class AsyncPostgresStore(PostgresHandle, AsyncClosing, Observed):
    """Fenced, leasable, meta-lookup journal store in a PostgreSQL schema, awaited.

    Takes the URL and options of ``PostgresStore`` (see there). Nothing connects
    until the first call. Close with ``await store.aclose()`` or ``async with``;
    a handle opened before a ``fork`` refuses in the child with
    ``ForkedStoreError`` and leaves the parent's connections alone.

    Raises:
        ConfigError: bad URL or option (P1), before any connection.
    """

    async_api: Literal[True] = True
    fenced_writes: Literal[True] = True

    def _start(self, settings: Settings) -> None:
        self._pool = make_async_pool(
            settings, f"rulvar-async-{settings.schema}", self._ready
        )
        self._boot_lock: asyncio.Lock | None = None
        self._running = 0  # calls in progress; aclose waits for them
        self._all_ended: asyncio.Future[None] | None = None
        self._twin: AsyncPostgresFencedTranscriptStore | None = None

    # -- lifecycle -------------------------------------------------------------

    def transcripts(self) -> AsyncPostgresFencedTranscriptStore:
        """Return the memoized fenced blob twin: same pool, same fence (T6, T7)."""
        if self._twin is None:
            self._twin = AsyncPostgresFencedTranscriptStore(self)
        return self._twin

    def _telemetry_figures(self) -> dict[str, Any]:
        return pool_figures(self._pool)

    async def aclose(self) -> None:
        """Let running calls finish, then close the pool; later calls raise."""
        if self._closed:
            return
        self._closed = True
        if self._twin is not None:
            self._twin._closed = True
        if self._fork.forked:
            return  # the pool's sockets are the parent's: leave them alone
        if self._running:
            self._all_ended = asyncio.get_running_loop().create_future()
            await self._all_ended
        await self._pool.close()

    async def _ensure_booted(self, operation: str) -> None:
        """Create the schema's objects once per instance (P3), as the sync store does."""
        if self._booted:
            return
        if self._boot_lock is None:
            self._boot_lock = asyncio.Lock()
        async with self._boot_lock:
            if self._booted is False:  # another task may have booted meanwhile
                present = True
                with translated("boot", self._settings.where, self._settings.secrets):
                    await self._pool.open()
                    async with self._pool.checkout(self._boot_wait_s()) as conn:
                        if not self._settings.readonly:
                            # A booted schema costs one plain query (see the sync store).
                            cursor = await conn.execute(self._sql.booted)
                            row = await cursor.fetchone()
                            if row is None or row[0] is not True:
                                await conn.execute(self._boot_statement())
                        else:
                            cursor = await conn.execute(self._sql.store_present)
                            row = await cursor.fetchone()
                            present = row is not None and row[0] is True
                        if present:  # last_ref's plan, on the boot's connection
                            await alearn_collation(conn, self._plans)
                            # The next call gets this connection back (LIFO).
                            await awarm_reads(
                                conn, self._reads, self._plans.refs_bytewise
                            )
                self._booted_if_present(present, operation)

    async def _ready(self, conn: AsyncConn) -> None:
        """Ready a new pooled connection's hot reads once booted (``PostgresStore._ready``)."""
        if self._booted and self._reads:
            await awarm_reads(conn, self._reads, self._plans.refs_bytewise)

    # -- the executor ------------------------------------------------------------

    async def _call(self, step: Step[T]) -> T:
        return await self._guarded(step.operation, self._run(step))

    async def _guarded(self, operation: str, call: Coroutine[Any, Any, T]) -> T:
        """Run a plan in the caller's task; a cancel waits for the call's end (Y2).

        A caller cancelled meanwhile stays in the call until it is over,
        committed whole or not at all with its connection back in the pool
        outside any transaction, and only then gets ``CancelledError``
        (``_uncancelled``).
        """
        try:
            self._fork.check(operation)
            self._refuse_if_closed(operation)
        except BaseException:
            call.close()  # never awaited: no "never awaited" warning
            raise
        self._running += 1
        try:
            return await Uncancelled(call)
        finally:
            self._running -= 1
            ended = self._all_ended
            if not self._running and ended is not None and not ended.done():
                ended.set_result(None)

    async def _run(self, step: Step[T]) -> T:
        # A signal waits for the call's end: no connection is lost to it (P12).
        with interrupts_deferred():
            return await self._run_steps(step)

    async def _run_steps(self, step: Step[T]) -> T:
        while True:
            if step.kind == "mutate":
                answer: Any = await self._mutate(
                    step.operation, step.statement, step.args
                )
            elif step.kind == "none":
                answer = None
            else:
                answer = await self._read(step)
            result = step.finish(answer)
            if not isinstance(result, Step):
                return result
            step = result

    async def _mutate(self, operation: str, call: str, args: Sequence[Any]) -> int:
        """One run-scoped mutation as ONE transaction (see ``PostgresStore._mutate``)."""
        await self._ensure_booted(operation)
        where, secrets = self._settings.where, self._settings.secrets
        attempt = 0
        while True:
            try:
                with translated(operation, where, secrets):
                    async with self._pool.checkout() as conn:
                        row = await run_mutation_async(
                            conn, operation, call, args, self._prepared.get(call)
                        )
                result = mutation_result(row, operation, where)
            except StoreBusyError as exc:
                await asyncio.sleep(self._busy_delay(exc, attempt))
                attempt += 1
                continue
            except StoreUnavailableError as exc:
                self._note_unavailable(exc)
                raise
            await hit_off_loop(operation, "after-commit")
            return result

    async def _read(self, step: Step[Any]) -> Any:
        await self._ensure_booted(step.operation)
        prepared = self._reads.get(step.statement)
        with translated(step.operation, self._settings.where, self._settings.secrets):
            async with self._pool.checkout() as conn:
                if prepared is not None:
                    return await read_prepared_async(
                        conn, prepared, step.args, step.kind
                    )
                async with conn.cursor(row_factory=READ_ROWS[step.kind]) as cursor:
                    await cursor.execute(step.statement, step.args)
                    return await cursor.fetchall()

    # -- journal, leases, operator reads: the sync store's plans, awaited --------

    async def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append one entry; J7 order: run match, fence, then the J6 seq guard."""
        await self._call(self._plans.append(run_id, entry, lease))

    async def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order (J2); ``[]`` when unknown (J5)."""
        return await self._call(self._plans.load(run_id))

    async def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` (see ``PostgresStore``)."""
        return await self._call(self._plans.load_since(run_id, cursor))

    async def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the run's whole meta record (M2); fenced when leased (F1)."""
        await self._call(self._plans.put_meta(meta, lease))

    async def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` (M5)."""
        return await self._call(self._plans.get_meta(run_id))

    async def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return matching metas ordered by run id (M4)."""
        return await self._call(self._plans.list_runs(run_filter))

    async def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove entries, meta and lease row together; the epoch stays (M6, L5)."""
        await self._call(self._plans.delete(run_id, lease))

    async def meta_page(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Return up to ``limit`` (run id, meta text) pairs after ``after``, by run id."""
        return await self._call(self._plans.meta_page(after, limit))

    async def peek_lease(self, run_id: str) -> LeaseState | None:
        """Return the run's lease row and the lease clock's reading; takes nothing."""
        return await self._call(self._plans.peek_lease(run_id))

    async def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with the next epoch (L1-L3), on the lease clock.

        A live lease whose holder process provably died is taken over at once
        (L11); this process's liveness session opens on a thread, once.
        """
        settings = self._settings
        key = (
            None
            if settings.readonly
            else await liveness_key_async(settings.conninfo, settings.connect_timeout_s)
        )
        return await self._call(self._plans.acquire(run_id, owner, key))

    async def renew(self, lease: Lease) -> None:
        """Extend a live lease to now + ttl (L8); a dead one raises (L6)."""
        await self._call(self._plans.renew(lease))

    # -- fused writes (L14, L15): the sync store's, awaited ---------------------

    # ``in_brief_lease`` awaits its work, which gets awaited views (``_brief``);
    # SQLite's asyncio store runs a sync work on its writer thread instead.
    brief_work_awaited: Literal[True] = True

    async def acquire_with_last_ref(
        self, run_id: str, owner: str, prefix: str
    ) -> tuple[Lease, str | None]:
        """``PostgresStore.acquire_with_last_ref``, awaited: one round trip."""
        settings = self._settings
        key = (
            None
            if settings.readonly
            else await liveness_key_async(settings.conninfo, settings.connect_timeout_s)
        )
        return await self._guarded(
            "acquire", acquire_with_last_ref_async(self, run_id, owner, prefix, key)
        )

    async def in_brief_lease(
        self, run_id: str, owner: str, work: AsyncBriefWork[T]
    ) -> T:
        """``PostgresStore.in_brief_lease``: ``await work(lease, journal, blobs)`` inside.

        The whole transaction runs in the caller's task and a cancel waits
        for its end (Y2), committed whole or rolled back.
        """
        settings = self._settings
        key = (
            None
            if settings.readonly
            else await liveness_key_async(settings.conninfo, settings.connect_timeout_s)
        )
        frame = Frame.of(self._plans, run_id, owner, key)
        return await self._guarded(OPERATION_BRIEF, self._brief(frame, work))

    async def _brief(self, frame: Frame, work: AsyncBriefWork[T]) -> T:
        await self._ensure_booted(OPERATION_BRIEF)
        where, secrets = self._settings.where, self._settings.secrets
        attempt = 0
        with interrupts_deferred():
            while True:
                started = WorkStarted()
                try:
                    with translated(OPERATION_BRIEF, where, secrets):
                        async with self._pool.checkout() as conn:
                            result = await run_brief_async(
                                conn, self._plans, frame, work, where, secrets, started
                            )
                except StoreBusyError as exc:
                    if started.started:
                        raise
                    await asyncio.sleep(self._busy_delay(exc, attempt))
                    attempt += 1
                    continue
                except StoreUnavailableError as exc:
                    self._note_unavailable(exc)
                    raise
                await hit_off_loop(OPERATION_BRIEF, "after-commit")
                return result

    async def brief_put(
        self,
        owner: str,
        ref: str,
        blob: BlobInput,
        under: str,
        tail: str,
        meta: RunMeta | None = None,
        meta_replaces: bool = True,
        need_prior: bool = False,
    ) -> bool:
        """``PostgresStore.brief_put``, awaited: one round trip (L16)."""
        step = self._plans.brief_put(
            owner, ref, blob, under, tail, meta, meta_replaces, need_prior
        )
        return await self._call(step)

    async def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease
    ) -> None:
        """A blob and its run's meta in ONE fenced transaction (L15)."""
        await self._call(self._plans.put_with_meta(ref, blob, meta, lease))

    async def put_meta_and_release(self, meta: RunMeta, lease: Lease) -> None:
        """Write the run's meta and release ``lease`` in ONE fenced transaction (L15)."""
        await self._call(self._plans.put_meta_and_release(meta, lease))

    async def release(self, lease: Lease) -> None:
        """Give a live lease up; a dead one raises (L6). The epoch stays (L4)."""
        await self._call(self._plans.release(lease))


@final
@instrumented(
    lambda twin: postgres_target(twin._store._settings.conninfo, twin._store.schema),
    role="blobs",
)
class AsyncPostgresFencedTranscriptStore(AsyncClosing, Observed):
    """Blobs in ``rulvar_blobs`` for asyncio callers; leased writes are fenced (T6).

    Obtain it from ``AsyncPostgresStore.transcripts()``; it closes with that
    store, and ``aclose()`` here leaves the shared pool to the store.
    """

    async_api: Literal[True] = True
    fenced_writes: Literal[True] = True

    def __init__(self, store: AsyncPostgresStore) -> None:
        self._store = store
        self._closed = False
        self._queued = QueuedPuts()

    def __repr__(self) -> str:
        return f"AsyncPostgresFencedTranscriptStore({self._store!r})"

    def _open(self, operation: str) -> AsyncPostgresStore:
        if self._closed:
            raise StoreClosedError(
                f"{operation}: the transcript store is closed", operation
            )
        return self._store

    async def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store ``blob`` under ``ref`` (T1); a leased put is fenced on the ref's run.

        Puts queued under the same lease (``queue_put``) ride along, as on the
        sync store: one ``put_many`` statement carries them, then this one.
        """
        store = self._open("blob put")
        step = store._plans.blob_put(ref, blob, lease)
        riders = self._queued.take(lease)
        if riders:
            await self._send(riders, (ref, bytes(blob)))
        else:
            await store._call(step)

    async def queue_put(
        self,
        ref: str,
        blob: BlobInput,
        lease: Lease | None = None,
        linger_s: float = QUEUE_LINGER_S,
    ) -> QueuedPut:
        """Queue ``put`` to ride the next ``put`` under the same lease (the sync store's twin).

        Raises:
            InvalidArgumentError: a bad ref, blob or lease, here.
        """
        store = self._open("blob put")
        store._plans.blob_put(ref, blob, lease)  # its checks, now
        data = bytes(blob)  # copied now: a later mutation must not leak in (D3)
        queued = QueuedPut(
            ref, data, lease, time.monotonic() + linger_s, asyncio.Event()
        )
        if lease is None:  # nothing to ride with: sent now
            await acarried([queued], partial(self.put, ref, data))
            return queued
        return self._queued.queue(queued)

    async def await_put(self, queued: QueuedPut) -> bool:
        """Return once a queued put is durable (or raise as ``put``).

        Returns whether a put came within the linger to carry it. A cancelled
        waiter's put is never sent unless a put took it already.
        """
        decided = queued.decided
        assert isinstance(decided, asyncio.Event)  # queued by this asyncio store
        try:
            try:
                await asyncio.wait_for(decided.wait(), queued.left_s())
            except TimeoutError:
                riders = self._queued.expired(queued)
                with suppress(Exception):  # each rider's error is its waiter's
                    await self._send(riders)
                await decided.wait()
        except BaseException:
            self._queued.withdraw(queued)
            raise
        if queued.error is not None:
            raise queued.error
        return queued.accompanied

    async def flush_queued(self) -> None:
        """Send every queued put now (a reader must see them)."""
        for riders in by_lease(self._queued.take_all()):
            with suppress(Exception):  # each rider's error is its waiter's
                await self._send(riders)

    async def _send(self, riders: list[QueuedPut], *tail: tuple[str, bytes]) -> None:
        """Send queued puts of one lease (then ``tail``) as ONE statement."""
        if not riders:
            return
        store = self._store

        async def send() -> None:
            items = last_writes(riders, *tail)
            many = put_many_step(store._plans, items, riders[0].lease)
            assert many is not None  # riders is not empty
            await store._call(many)

        await acarried(riders, send)

    async def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run in ONE fenced transaction (T11)."""
        store = self._open("blob put_many")
        step = put_many_step(store._plans, items, lease)
        if step is not None:
            await store._call(step)

    async def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` (T2)."""
        store = self._open("blob get")
        return await store._call(store._plans.blob_get(ref))

    async def list_refs(self, run_id: str) -> list[str]:
        """Return the refs under ``run_id + "/"``, sorted by code point (T4)."""
        store = self._open("blob list_refs")
        return await store._call(store._plans.blob_list(run_id))

    async def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12, ``_last_ref``)."""
        store = self._open("blob last_ref")
        return await store._call(last_ref_step(store._plans, run_id, prefix))

    async def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13, ``_get_under``)."""
        store = self._open("blob get_under")
        return await store._call(get_under_step(store._plans, run_id, prefix))

    async def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; missing is a no-op (T2); a leased delete is fenced."""
        store = self._open("blob delete")
        await store._call(store._plans.blob_delete(ref, lease))

    async def aclose(self) -> None:
        """Nothing to release: the pool belongs to, and closes with, the store."""
