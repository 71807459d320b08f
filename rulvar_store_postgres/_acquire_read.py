"""``acquire_with_last_ref``: a hold's acquire and its first read in ONE round trip.

A LangGraph hold acquires its thread's lease, and the invocation's first call
reads the newest checkpoint of the root namespace (``last_ref``, T12). The two
statements do not depend on each other, so they are sent together in one
pipeline on one connection: the acquire's own call (its own transaction, as
``acquire`` runs it) and then the read (its own), answered together. The read
runs after the acquire committed, so it sees what a read after ``acquire``
would; the acquire's refusal still names the holder (one more read, on the
refused path only). Under an armed failpoint hook, or before the collation of
the blobs key is known (``_last_ref``), the two run one after the other
through the ordinary paths, so every failpoint stays where it was.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Final

from rulvar_store import Lease
from rulvar_store.backend import armed, hit
from rulvar_store.errors import StoreBusyError, StoreUnavailableError
from rulvar_store_postgres._errors import mutation_result, translated
from rulvar_store_postgres._interrupts import interrupts_deferred
from rulvar_store_postgres._last_ref import last_ref_step
from rulvar_store_postgres._plans import READ_ROWS, Plans, Step
from rulvar_store_postgres._transaction import confirmed, hit_off_loop

if TYPE_CHECKING:
    from rulvar_store_postgres._async_store import AsyncPostgresStore
    from rulvar_store_postgres._store import PostgresStore

__all__ = ["acquire_with_last_ref", "acquire_with_last_ref_async"]

OPERATION: Final = "acquire"


def _steps(
    plans: Plans, run_id: str, owner: str, prefix: str, liveness: int | None
) -> tuple[Step[Lease], Step[str | None]] | None:
    """The two plans, or ``None`` when they cannot share a pipeline."""
    acquire = plans.acquire(run_id, owner, liveness)
    newest = last_ref_step(plans, run_id, prefix)
    if plans.refs_bytewise is None or newest.kind not in READ_ROWS:
        return None  # the collation is read first: no single round trip
    return acquire, newest


def _lease(acquire: Step[Lease], row: Any, where: str) -> Lease | Step[Lease]:
    return acquire.finish(mutation_result(row, OPERATION, where))


def acquire_with_last_ref(
    store: PostgresStore, run_id: str, owner: str, prefix: str
) -> tuple[Lease, str | None]:
    """The sync store's (see the module)."""
    store._ensure_booted(OPERATION)
    steps = (
        None
        if armed()
        else _steps(store._plans, run_id, owner, prefix, store._liveness())
    )
    if steps is None:
        lease = store.acquire(run_id, owner)
        return lease, store.transcripts().last_ref(run_id, prefix)
    acquire, newest = steps
    store._fork.check(OPERATION)
    where, secrets = store._settings.where, store._settings.secrets
    attempt = 0
    with interrupts_deferred():
        while True:
            try:
                with (
                    translated(OPERATION, where, secrets),
                    store._pool.checkout() as conn,
                ):
                    conn.sync_wait_cancelled = False
                    reads = conn.cursor(row_factory=READ_ROWS[newest.kind])
                    with conn.pipeline():
                        granted = conn.execute(acquire.statement, acquire.args)
                        reads.execute(newest.statement, newest.args)
                    row = confirmed(conn, granted.fetchone())
                    rows = reads.fetchall()
                    reads.close()
            except StoreBusyError as exc:
                time.sleep(store._busy_delay(exc, attempt))
                attempt += 1
                continue
            except StoreUnavailableError as exc:
                store._note_unavailable(exc)
                raise
            break
    hit(OPERATION, "after-commit")
    granted_or_refused = _lease(acquire, row, where)
    lease = (
        store._run(granted_or_refused)  # the refusal's read: it raises
        if isinstance(granted_or_refused, Step)
        else granted_or_refused
    )
    return lease, newest.finish(rows)  # type: ignore[return-value]  # a read's value


async def acquire_with_last_ref_async(
    store: AsyncPostgresStore,
    run_id: str,
    owner: str,
    prefix: str,
    liveness: int | None,
) -> tuple[Lease, str | None]:
    """The asyncio store's: the same statements, awaited."""
    await store._ensure_booted(OPERATION)
    steps = None if armed() else _steps(store._plans, run_id, owner, prefix, liveness)
    if steps is None:
        lease = await store.acquire(run_id, owner)
        return lease, await store.transcripts().last_ref(run_id, prefix)
    acquire, newest = steps
    where, secrets = store._settings.where, store._settings.secrets
    attempt = 0
    with interrupts_deferred():
        while True:
            try:
                with translated(OPERATION, where, secrets):
                    async with store._pool.checkout() as conn:
                        conn.sync_wait_cancelled = False
                        reads = conn.cursor(row_factory=READ_ROWS[newest.kind])
                        async with conn.pipeline():
                            granted = await conn.execute(
                                acquire.statement, acquire.args
                            )
                            await reads.execute(newest.statement, newest.args)
                        row = confirmed(conn, await granted.fetchone())
                        rows = await reads.fetchall()
                        await reads.close()
            except StoreBusyError as exc:
                await asyncio.sleep(store._busy_delay(exc, attempt))
                attempt += 1
                continue
            except StoreUnavailableError as exc:
                store._note_unavailable(exc)
                raise
            break
    await hit_off_loop(OPERATION, "after-commit")
    granted_or_refused = _lease(acquire, row, where)
    lease = (
        await store._run(granted_or_refused)
        if isinstance(granted_or_refused, Step)
        else granted_or_refused
    )
    return lease, newest.finish(rows)  # type: ignore[return-value]  # a read's value
