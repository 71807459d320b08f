"""The fenced blob twin of a PostgresStore: same schema, same pool, same fence (T6, T7)."""

from __future__ import annotations

import time
from contextlib import suppress
from functools import lru_cache, partial
from threading import Event
from typing import TYPE_CHECKING, Final, Literal, final

from rulvar_store import BlobBatch, BlobInput, Lease
from rulvar_store.backend import Observed, blob_batch, instrumented, not_live_lease
from rulvar_store.errors import StoreClosedError
from rulvar_store_postgres._get_under import get_under_step
from rulvar_store_postgres._last_ref import last_ref_step
from rulvar_store_postgres._plans import Plans, Step
from rulvar_store_postgres._queued import (
    QueuedPut,
    QueuedPuts,
    by_lease,
    carried,
    last_writes,
)
from rulvar_store_postgres._schema import (
    LOCK_SEED,
    STATUS_OK,
    run_lock_key,
)
from rulvar_store_postgres._telemetry_target import postgres_target

if TYPE_CHECKING:
    from rulvar_store_postgres._store import PostgresStore

__all__ = ["QUEUE_LINGER_S", "PostgresFencedTranscriptStore", "put_many_step"]

# How long a queued put waits for the put that carries it: a LangGraph step's
# checkpoint follows its task's writes after well under a millisecond (a
# 90th percentile of 0.9 ms on 2 shared cores), so 2 ms catches nearly all.
QUEUE_LINGER_S: Final = 0.002


@lru_cache(maxsize=64)
def put_many_statement(quoted_schema: str, count: int) -> str:
    """ONE statement that calls ``rulvar_py_blob_put`` once per item of a batch (T11).

    The run's lock is taken first and the lease clock read once after it (the
    ``FROM`` subquery, kept apart by ``OFFSET 0``, runs before any call), and
    every call gets that reading as its ``p_now``: under the lock nobody can
    change the run's lease row, so with one reading every call reaches the same
    verdict, all stored or none (a reading per call could see the lease expire
    between two calls). The function and the rows it stores are exactly
    ``put``'s (Appendix P); the statement is one implicit transaction on the
    autocommit connection, one round trip. It returns the sum of the statuses:
    0 when every call stored its blob. Scalar calls rather than ``unnest`` of
    arrays: arrays cost more to send than the parameters they hold.
    """
    call = (
        f"{quoted_schema}.rulvar_py_blob_put(%s::text, %s::text, %s::bytea, "
        "%s::text, %s::bigint, c.t)"
    )
    return (
        f"SELECT {' + '.join([call] * count)} FROM (SELECT coalesce(%s::bigint, "
        "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS t "
        f"FROM (SELECT pg_advisory_xact_lock(hashtextextended(%s::text, {LOCK_SEED}))) "
        "AS locked OFFSET 0) AS c"
    )


def put_many_step(
    plans: Plans, items: BlobBatch, lease: Lease | None
) -> Step[None] | None:
    """The plan of ``put_many`` (sync and asyncio twins), ``None`` for an empty batch."""
    batch = blob_batch(items, lease)
    if not batch.items:
        return None
    presented = batch.lease
    owner, epoch = (
        (None, None) if presented is None else (presented.owner, presented.epoch)
    )

    def done(status: int) -> None:
        if status != STATUS_OK and presented is not None:
            raise not_live_lease("blob put_many", presented)

    args: list[object] = []
    for ref, data in batch.items:
        args += (batch.run_id, ref, data, owner, epoch)
    args += (plans.clock(), run_lock_key(plans.sql.schema, batch.run_id))
    statement = put_many_statement(plans.sql.quoted, len(batch.items))
    return Step("blob_put_many", "mutate", statement, args, done)


@final
@instrumented(
    lambda twin: postgres_target(twin._store._settings.conninfo, twin._store.schema),
    role="blobs",
)
class PostgresFencedTranscriptStore(Observed):
    """Blobs in ``rulvar_blobs``; leased writes take the run's lock and fence (T6).

    Obtain it from ``PostgresStore.transcripts()``; it lives and dies with that
    store: closing the store closes it; ``close()`` here leaves the shared pool to
    the store, like every twin.
    """

    fenced_writes: Literal[True] = True

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._closed = False
        self._queued = QueuedPuts()

    def __repr__(self) -> str:
        return f"PostgresFencedTranscriptStore({self._store!r})"

    def _mark_closed(self) -> None:
        self._closed = True

    def _ensure_open(self, operation: str) -> None:
        if self._closed:
            raise StoreClosedError(
                f"{operation}: the transcript store is closed", operation
            )

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store ``blob`` under ``ref`` (T1); a leased put is fenced on the ref's run.

        Puts queued under the same lease (``queue_put``) ride along: one
        ``put_many`` statement carries them first, then this one.
        """
        self._ensure_open("blob put")
        step = self._store._plans.blob_put(ref, blob, lease)
        riders = self._queued.take(lease)
        if riders:
            self._send(riders, (ref, bytes(blob)))
        else:
            self._store._run(step)

    def queue_put(
        self,
        ref: str,
        blob: BlobInput,
        lease: Lease | None = None,
        linger_s: float = QUEUE_LINGER_S,
    ) -> QueuedPut:
        """Queue ``put`` to ride the next ``put`` under the same lease (one round trip).

        For a write nobody waits on at once (a LangGraph task's writes, which
        the step's checkpoint follows): a put under the same lease within
        ``linger_s`` sends both in one statement; else ``await_put`` sends it
        alone. Finish it with ``await_put``, which returns once it is
        durable, as ``put`` would. An unleased put is sent at once.

        Raises:
            InvalidArgumentError: a bad ref, blob or lease, here.
        """
        self._ensure_open("blob put")
        self._store._plans.blob_put(ref, blob, lease)  # its checks, now
        data = bytes(blob)  # copied now: a later mutation must not leak in (D3)
        queued = QueuedPut(ref, data, lease, time.monotonic() + linger_s, Event())
        if lease is None:  # nothing to ride with: sent now
            carried([queued], partial(self.put, ref, data))
            return queued
        return self._queued.queue(queued)

    def await_put(self, queued: QueuedPut) -> bool:
        """Return once a queued put is durable (or raise as ``put``).

        Returns whether a put came within the linger to carry it. An
        interrupted waiter's put is never sent unless a put took it already.
        """
        decided = queued.decided
        assert isinstance(decided, Event)  # queued by this sync store
        try:
            if not decided.wait(queued.left_s()):
                riders = self._queued.expired(queued)
                with suppress(Exception):  # each rider's error is its waiter's
                    self._send(riders)
                decided.wait()
        except BaseException:
            self._queued.withdraw(queued)
            raise
        if queued.error is not None:
            raise queued.error
        return queued.accompanied

    def flush_queued(self) -> None:
        """Send every queued put now (a reader must see them).

        A queued put's error goes to its own ``await_put``, not to the flusher.
        """
        for riders in by_lease(self._queued.take_all()):
            with suppress(Exception):  # each rider's error is its waiter's
                self._send(riders)

    def _send(self, riders: list[QueuedPut], *tail: tuple[str, bytes]) -> None:
        """Send queued puts of one lease (then ``tail``) as ONE statement."""
        if not riders:
            return

        def send() -> None:
            items = last_writes(riders, *tail)
            many = put_many_step(self._store._plans, items, riders[0].lease)
            assert many is not None  # riders is not empty
            self._store._run(many)

        carried(riders, send)

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run in ONE fenced transaction (T11).

        One statement, one round trip (``put_many_statement``); a lease that is
        not live refuses the whole batch. An empty batch sends nothing.
        """
        self._ensure_open("blob put_many")
        step = put_many_step(self._store._plans, items, lease)
        if step is not None:
            self._store._run(step)

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` (T2)."""
        self._ensure_open("blob get")
        return self._store._run(self._store._plans.blob_get(ref))

    def list_refs(self, run_id: str) -> list[str]:
        """Return the refs under ``run_id + "/"``, sorted by code point (T4)."""
        self._ensure_open("blob list_refs")
        return self._store._run(self._store._plans.blob_list(run_id))

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12, ``_last_ref``)."""
        self._ensure_open("blob last_ref")
        return self._store._run(last_ref_step(self._store._plans, run_id, prefix))

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13, ``_get_under``)."""
        self._ensure_open("blob get_under")
        return self._store._run(get_under_step(self._store._plans, run_id, prefix))

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; missing is a no-op (T2); a leased delete is fenced."""
        self._ensure_open("blob delete")
        self._store._run(self._store._plans.blob_delete(ref, lease))

    def close(self) -> None:
        """Nothing to release: the pool belongs to, and closes with, the store."""
