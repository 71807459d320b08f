"""A brief lease inside ONE transaction: acquire, the work, release, one commit (L14).

A write outside any hold takes a lease of its own so it is refused while
another worker holds the run and so it fences out every earlier lease (the
epoch moves). As three calls that is three commits: acquire, the write,
release. ``in_brief_lease`` runs the same steps in one transaction on one
pooled connection:

* ``BEGIN`` and the acquire's own server function (``rulvar_py_acquire``: the
  run's advisory transaction lock, the live-lease check with the L11 liveness
  verdict, the epoch bump, the lease row), sent together in one pipeline;
  a refusal reads the holder's row inside the same transaction (L12) and rolls
  back, so nothing changes;
* the caller's work through ``JournalInside`` and ``BlobsInside`` (or their
  asyncio twins): the operations' own plans (``_plans``) on the transaction's
  connection, every write the fenced server function any leased write calls,
  so it checks the brief lease live as every leased write does (the run's lock
  is re-entrant within the transaction);
* the lease row deleted (owner and epoch pinned) and ``COMMIT``, sent together.

The run's advisory lock is held from the acquire to the commit, so no other
writer of the run can interleave. What a reader can observe is what acquire +
work + release leaves; a failure anywhere rolls all of it back (the epoch too:
nothing was written under it). The views offer what a LangGraph saver's plans
call, with the same argument rules as the store's own methods: the journal's
``get_meta``, ``put_meta``, ``put_with_meta`` and ``delete``; the blob twin's
``get``, ``put``, ``delete``, ``list_refs``, ``last_ref`` and ``get_under``. A
write must carry the brief lease.

The sync store and the asyncio store share everything here but the awaits:
``InsideSteps`` builds each call's plan, ``Frame`` the transaction's opening
and closing statements; ``run_brief`` and ``run_brief_async`` only execute
them. Failpoints: ``after-begin`` (the block open, nothing done),
``before-commit`` (the work done, uncommitted), ``after-send`` (COMMIT sent,
reply unread; only while a hook is armed, as ``_transaction`` does) and
``after-commit``, all under the operation name ``in_brief_lease``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg

from rulvar_store import BlobInput, Lease, LeaseHeldError, RunMeta
from rulvar_store.backend import armed, hit
from rulvar_store_postgres._errors import mutation_result, translated
from rulvar_store_postgres._get_under import get_under_step
from rulvar_store_postgres._last_ref import last_ref_step
from rulvar_store_postgres._plans import READ_ROWS, Plans, Step
from rulvar_store_postgres._schema import BEGIN, COMMIT
from rulvar_store_postgres._transaction import (
    commit_observed,
    commit_observed_async,
    confirmed,
    hit_off_loop,
)

if TYPE_CHECKING:
    from rulvar_store_postgres._async_pool import AsyncConn
    from rulvar_store_postgres._pool import Conn

__all__ = [
    "OPERATION",
    "AsyncBlobsInside",
    "AsyncBriefWork",
    "AsyncJournalInside",
    "BlobsInside",
    "BriefWork",
    "Frame",
    "InsideSteps",
    "JournalInside",
    "WorkStarted",
    "run_brief",
    "run_brief_async",
]

T = TypeVar("T")
OPERATION: Final = "in_brief_lease"

BriefWork = Callable[[Lease, "JournalInside", "BlobsInside"], T]
"""The sync store's work: ``(lease, journal, blobs)``, views of the transaction."""
AsyncBriefWork = Callable[
    [Lease, "AsyncJournalInside", "AsyncBlobsInside"], Awaitable[T]
]
"""The asyncio store's work: the same, its views awaited."""


class WorkStarted:
    """Whether the work began: before it, a busy transaction may be retried whole."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False


class InsideSteps:
    """The plans of the work's calls: the store's own, a write carrying the brief lease."""

    __slots__ = ("_plans", "_run_id")

    def __init__(self, plans: Plans, run_id: str) -> None:
        self._plans = plans
        self._run_id = run_id

    def _carried(self, lease: Lease | None, operation: str) -> Lease:
        # Every write here carries a lease, checked by its fenced function like
        # any leased write: work that hands another lease is refused, and a
        # write with none would not be fenced at all.
        if lease is None:
            raise LeaseHeldError(
                f"{operation} inside a brief lease must carry it",
                self._run_id,
                None,
                None,
            )
        return lease

    def get_meta(self, run_id: str) -> Step[RunMeta | None]:
        return self._plans.get_meta(run_id)

    def put_meta(self, meta: RunMeta, lease: Lease | None) -> Step[None]:
        step = self._plans.put_meta(meta, lease)
        self._carried(lease, "put_meta")
        return step

    def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease | None
    ) -> Step[None]:
        return self._plans.put_with_meta(
            ref, blob, meta, self._carried(lease, "put_with_meta")
        )

    def delete(self, run_id: str, lease: Lease | None) -> Step[None]:
        """The run's journal, meta and lease row (the brief lease's end finds none)."""
        step = self._plans.delete(run_id, lease)
        self._carried(lease, "delete")
        return step

    def blob_get(self, ref: str) -> Step[bytes | None]:
        return self._plans.blob_get(ref)

    def blob_put(self, ref: str, blob: BlobInput, lease: Lease | None) -> Step[None]:
        step = self._plans.blob_put(ref, blob, lease)
        self._carried(lease, "blob put")
        return step

    def blob_delete(self, ref: str, lease: Lease | None) -> Step[None]:
        step = self._plans.blob_delete(ref, lease)
        self._carried(lease, "blob delete")
        return step

    def list_refs(self, run_id: str) -> Step[list[str]]:
        return self._plans.blob_list(run_id)

    def last_ref(self, run_id: str, prefix: str) -> Step[str | None]:
        return last_ref_step(self._plans, run_id, prefix)

    def get_under(self, run_id: str, prefix: str) -> Step[list[tuple[str, bytes]]]:
        return get_under_step(self._plans, run_id, prefix)


@dataclass(frozen=True, slots=True)
class Frame:
    """The transaction around the work: the acquire's plan, then the release's statement."""

    run_id: str
    owner: str
    acquire: Step[Lease]
    release: str

    @classmethod
    def of(cls, plans: Plans, run_id: str, owner: str, liveness: int | None) -> Frame:
        """Argument intake happens here, before any connection is taken."""
        acquire = plans.acquire(run_id, owner, liveness)
        return cls(run_id, owner, acquire, plans.sql.brief_release)

    def release_args(self, lease: Lease) -> tuple[str, str, int]:
        return (lease.run_id, lease.owner, lease.epoch)


class _SyncExecutor:
    """Runs plans on the transaction's connection; driver errors come out typed."""

    __slots__ = ("_conn", "_secrets", "_where")

    def __init__(self, conn: Conn, where: str, secrets: Any) -> None:
        self._conn = conn
        self._where = where
        self._secrets = secrets

    def answer(self, step: Step[Any]) -> Any:
        if step.kind == "none":
            return None
        with translated(step.operation, self._where, self._secrets):
            # Never prepared: a statement the server forgot could not be
            # prepared again inside the open transaction.
            if step.kind == "mutate":  # one integer back
                row = self._conn.execute(
                    step.statement, step.args, prepare=False
                ).fetchone()
                return mutation_result(row, step.operation, self._where)
            with self._conn.cursor(row_factory=READ_ROWS[step.kind]) as cursor:
                return cursor.execute(
                    step.statement, step.args, prepare=False
                ).fetchall()

    def finish(self, step: Step[T], answer: Any) -> T:
        while True:
            result = step.finish(answer)
            if not isinstance(result, Step):
                return result
            step = result
            answer = self.answer(step)

    def run(self, step: Step[T]) -> T:
        return self.finish(step, self.answer(step))


class _AsyncExecutor:
    """``_SyncExecutor`` for an asyncio connection."""

    __slots__ = ("_conn", "_secrets", "_where")

    def __init__(self, conn: AsyncConn, where: str, secrets: Any) -> None:
        self._conn = conn
        self._where = where
        self._secrets = secrets

    async def answer(self, step: Step[Any]) -> Any:
        if step.kind == "none":
            return None
        with translated(step.operation, self._where, self._secrets):
            if step.kind == "mutate":  # one integer back
                cursor = await self._conn.execute(
                    step.statement, step.args, prepare=False
                )
                row = await cursor.fetchone()
                return mutation_result(row, step.operation, self._where)
            async with self._conn.cursor(row_factory=READ_ROWS[step.kind]) as reads:
                await reads.execute(step.statement, step.args, prepare=False)
                return await reads.fetchall()

    async def finish(self, step: Step[T], answer: Any) -> T:
        while True:
            result = step.finish(answer)
            if not isinstance(result, Step):
                return result
            step = result
            answer = await self.answer(step)

    async def run(self, step: Step[T]) -> T:
        return await self.finish(step, await self.answer(step))


class JournalInside:
    """The journal's meta calls and run delete, inside the transaction."""

    __slots__ = ("_run", "_steps")

    def __init__(self, steps: InsideSteps, run: Callable[[Step[Any]], Any]) -> None:
        self._steps = steps
        self._run = run

    def get_meta(self, run_id: str) -> RunMeta | None:
        result: RunMeta | None = self._run(self._steps.get_meta(run_id))
        return result

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self._run(self._steps.put_meta(meta, lease))

    def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease | None = None
    ) -> None:
        self._run(self._steps.put_with_meta(ref, blob, meta, lease))

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self._run(self._steps.delete(run_id, lease))


class BlobsInside:
    """The blob twin's calls, inside the transaction."""

    __slots__ = ("_run", "_steps")

    def __init__(self, steps: InsideSteps, run: Callable[[Step[Any]], Any]) -> None:
        self._steps = steps
        self._run = run

    def get(self, ref: str) -> bytes | None:
        result: bytes | None = self._run(self._steps.blob_get(ref))
        return result

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        self._run(self._steps.blob_put(ref, blob, lease))

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self._run(self._steps.blob_delete(ref, lease))

    def list_refs(self, run_id: str) -> list[str]:
        result: list[str] = self._run(self._steps.list_refs(run_id))
        return result

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        result: str | None = self._run(self._steps.last_ref(run_id, prefix))
        return result

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        result: list[tuple[str, bytes]] = self._run(
            self._steps.get_under(run_id, prefix)
        )
        return result


class AsyncJournalInside:
    """``JournalInside`` awaited."""

    __slots__ = ("_run", "_steps")

    def __init__(
        self, steps: InsideSteps, run: Callable[[Step[Any]], Awaitable[Any]]
    ) -> None:
        self._steps = steps
        self._run = run

    async def get_meta(self, run_id: str) -> RunMeta | None:
        result: RunMeta | None = await self._run(self._steps.get_meta(run_id))
        return result

    async def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        await self._run(self._steps.put_meta(meta, lease))

    async def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease | None = None
    ) -> None:
        await self._run(self._steps.put_with_meta(ref, blob, meta, lease))

    async def delete(self, run_id: str, lease: Lease | None = None) -> None:
        await self._run(self._steps.delete(run_id, lease))


class AsyncBlobsInside:
    """``BlobsInside`` awaited."""

    __slots__ = ("_run", "_steps")

    def __init__(
        self, steps: InsideSteps, run: Callable[[Step[Any]], Awaitable[Any]]
    ) -> None:
        self._steps = steps
        self._run = run

    async def get(self, ref: str) -> bytes | None:
        result: bytes | None = await self._run(self._steps.blob_get(ref))
        return result

    async def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        await self._run(self._steps.blob_put(ref, blob, lease))

    async def delete(self, ref: str, lease: Lease | None = None) -> None:
        await self._run(self._steps.blob_delete(ref, lease))

    async def list_refs(self, run_id: str) -> list[str]:
        result: list[str] = await self._run(self._steps.list_refs(run_id))
        return result

    async def last_ref(self, run_id: str, prefix: str) -> str | None:
        result: str | None = await self._run(self._steps.last_ref(run_id, prefix))
        return result

    async def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        result: list[tuple[str, bytes]] = await self._run(
            self._steps.get_under(run_id, prefix)
        )
        return result


def run_brief(
    conn: Conn,
    plans: Plans,
    frame: Frame,
    work: BriefWork[T],
    where: str,
    secrets: Any,
    started: WorkStarted,
) -> T:
    """The whole transaction on ``conn`` (sync); ``after-commit`` is the caller's."""
    conn.sync_wait_cancelled = False
    executor = _SyncExecutor(conn, where, secrets)
    acquire = frame.acquire
    try:
        # BEGIN and the acquire in one round trip.
        with conn.pipeline():
            conn.execute(BEGIN, prepare=False)
            cursor = conn.execute(acquire.statement, acquire.args, prepare=False)
        hit(OPERATION, "after-begin")
        epoch = mutation_result(cursor.fetchone(), OPERATION, where)
        lease = executor.finish(acquire, epoch)
        started.started = True
        steps = InsideSteps(plans, frame.run_id)
        result = work(
            lease,
            JournalInside(steps, executor.run),
            BlobsInside(steps, executor.run),
        )
        hit(OPERATION, "before-commit")
        if armed():
            conn.execute(frame.release, frame.release_args(lease), prepare=False)
            commit_observed(conn, OPERATION)
        else:
            # The release and the COMMIT in one round trip.
            with conn.pipeline():
                conn.execute(frame.release, frame.release_args(lease), prepare=False)
                conn.execute(COMMIT, prepare=False)
    except BaseException:
        # A lost connection must not hide the error that ended the transaction.
        with suppress(psycopg.Error):
            conn.rollback()
        raise
    confirmed(conn, None)
    return result


async def run_brief_async(
    conn: AsyncConn,
    plans: Plans,
    frame: Frame,
    work: AsyncBriefWork[T],
    where: str,
    secrets: Any,
    started: WorkStarted,
) -> T:
    """``run_brief`` for an asyncio connection: the same statements, awaited."""
    conn.sync_wait_cancelled = False
    executor = _AsyncExecutor(conn, where, secrets)
    acquire = frame.acquire
    try:
        async with conn.pipeline():
            await conn.execute(BEGIN, prepare=False)
            cursor = await conn.execute(acquire.statement, acquire.args, prepare=False)
        await hit_off_loop(OPERATION, "after-begin")
        epoch = mutation_result(await cursor.fetchone(), OPERATION, where)
        lease = await executor.finish(acquire, epoch)
        started.started = True
        steps = InsideSteps(plans, frame.run_id)
        result = await work(
            lease,
            AsyncJournalInside(steps, executor.run),
            AsyncBlobsInside(steps, executor.run),
        )
        await hit_off_loop(OPERATION, "before-commit")
        if armed():
            await conn.execute(frame.release, frame.release_args(lease), prepare=False)
            await commit_observed_async(conn, OPERATION)
        else:
            async with conn.pipeline():
                await conn.execute(
                    frame.release, frame.release_args(lease), prepare=False
                )
                await conn.execute(COMMIT, prepare=False)
    except BaseException:
        with suppress(psycopg.Error):
            await conn.rollback()
        raise
    confirmed(conn, None)
    return result
