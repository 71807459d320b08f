"""The asyncio SQLite store's queued writes (Q19): ``test_queued_writes`` for coroutines.

``queue_put`` queues a put to share the next write's COMMIT; the door's
worker thread commits it, with the write that took the lead over or alone
once its linger is over. Cancelling a waiter takes back a put no batch took,
and a lingering one hands the lead on. A real file, a real loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import LeaseHeldError
from rulvar_store_sqlite import AsyncSqliteStore, SqliteStore

LONG_LINGER_S = 30.0  # longer than any test: only company or a flush ends it

Body = Callable[[AsyncSqliteStore, Any], Awaitable[None]]


def _run(tmp_path: Path, body: Body) -> None:
    async def main() -> None:
        store = await AsyncSqliteStore.open(str(tmp_path / "queued.db"), ttl_ms=600_000)
        try:
            await body(store, store.transcripts())
        finally:
            await store.aclose()

    asyncio.run(main())


async def _door_idle(blobs: Any) -> None:
    """Return once the door's worker has handed over its last batch.

    Coroutines resume as soon as their batch commits, before the worker's
    hand-over; a put queued in that moment joins the queue behind it and
    commits at once instead of lingering (no less durable, but these tests
    count commits). A read runs on that same worker thread, after it.
    """
    await blobs.get("r1/idle-probe")


def _batches(store: AsyncSqliteStore) -> int:
    sync_store: SqliteStore = store.sync_store
    return sync_store._door.batches


@pytest.mark.clause("Q19")
def test_a_queued_put_shares_the_commit_of_the_next_write(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")
        await _door_idle(blobs)
        before = _batches(store)
        queued = await blobs.queue_put(
            "r1/w/a", b"writes", lease, linger_s=LONG_LINGER_S
        )
        assert await blobs.get("r1/w/a") is None  # queued, not written yet
        await blobs.put("r1/c/1", b"checkpoint", lease)
        started = time.monotonic()
        assert await blobs.await_put(queued) is True
        assert time.monotonic() - started < LONG_LINGER_S / 2
        assert _batches(store) == before + 1
        assert await blobs.get("r1/w/a") == b"writes"

    _run(tmp_path, body)


@pytest.mark.clause("Q19")
def test_queued_puts_keep_their_order_against_later_writes(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")
        first = await blobs.queue_put("r1/x", b"first", lease, linger_s=LONG_LINGER_S)
        second = await blobs.queue_put("r1/x", b"second", lease, linger_s=LONG_LINGER_S)
        await blobs.put("r1/y", b"company", lease)
        assert await blobs.await_put(first) is True
        assert await blobs.await_put(second) is True
        assert await blobs.get("r1/x") == b"second"

    _run(tmp_path, body)


@pytest.mark.clause("Q19")
def test_a_lone_queued_put_commits_at_the_end_of_its_linger(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")
        await _door_idle(blobs)
        started = time.monotonic()
        queued = await blobs.queue_put("r1/w/a", b"alone", lease, linger_s=0.05)
        assert await blobs.await_put(queued) is False
        assert time.monotonic() - started >= 0.05
        assert await blobs.get("r1/w/a") == b"alone"

    _run(tmp_path, body)


@pytest.mark.clause("Q19")
def test_a_flush_lands_a_lingering_put_at_once(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")
        queued = await blobs.queue_put(
            "r1/w/a", b"to read", lease, linger_s=LONG_LINGER_S
        )
        await blobs.flush_queued()
        assert await blobs.get("r1/w/a") == b"to read"
        assert await asyncio.wait_for(blobs.await_put(queued), LONG_LINGER_S / 2)

    _run(tmp_path, body)


@pytest.mark.clause("Q19", "F2")
def test_a_stale_queued_put_is_refused_alone(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        stale = await store.acquire("r1", "me")
        await blobs.put("r1/w/a", b"before", stale)
        await store.release(stale)
        current = await store.acquire("r1", "successor")
        queued = await blobs.queue_put(
            "r1/w/a", b"stale", stale, linger_s=LONG_LINGER_S
        )
        await blobs.put("r1/c/1", b"current", current)
        with pytest.raises(LeaseHeldError):
            await blobs.await_put(queued)
        assert await blobs.get("r1/w/a") == b"before"
        assert await blobs.get("r1/c/1") == b"current"

    _run(tmp_path, body)


@pytest.mark.clause("Q19")
def test_queued_puts_of_many_tasks_all_land(tmp_path: Path) -> None:
    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")

        async def writer(worker: int) -> None:
            for i in range(40):
                ref = f"r1/w/{worker}-{i}"
                if i % 2:
                    await blobs.await_put(
                        await blobs.queue_put(ref, ref.encode(), lease)
                    )
                else:
                    await blobs.put(ref, ref.encode(), lease)

        await asyncio.wait_for(
            asyncio.gather(*(writer(n) for n in range(4))), LONG_LINGER_S
        )
        refs = await blobs.list_refs("r1")
        assert len(refs) == 160
        for ref in refs:
            assert await blobs.get(ref) == ref.encode()

    _run(tmp_path, body)


@pytest.mark.clause("Q14", "Q19")
def test_a_cancelled_lingering_put_never_runs_and_blocks_nobody(tmp_path: Path) -> None:
    """Cancelled while it lingers as the next batch's leader: its put is taken
    back, and a put queued behind it still commits (the lead was handed on)."""

    async def body(store: AsyncSqliteStore, blobs: Any) -> None:
        lease = await store.acquire("r1", "me")
        await _door_idle(blobs)
        lingering = await blobs.queue_put(
            "r1/w/a", b"cancelled", lease, linger_s=LONG_LINGER_S
        )
        behind = await blobs.queue_put(
            "r1/w/b", b"behind", lease, linger_s=LONG_LINGER_S
        )
        waiter = asyncio.ensure_future(blobs.await_put(lingering))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.wait_for(blobs.await_put(behind), LONG_LINGER_S / 2)
        await asyncio.wait_for(blobs.put("r1/c/1", b"later", lease), LONG_LINGER_S / 2)
        assert await blobs.get("r1/w/a") is None
        assert await blobs.get("r1/w/b") == b"behind"
        assert await blobs.get("r1/c/1") == b"later"

    _run(tmp_path, body)
