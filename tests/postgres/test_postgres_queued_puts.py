"""Queued PostgreSQL blob puts ride the next put of their lease (Q19).

``queue_put`` lingers; a plain ``put`` under the same lease sends both as ONE
``put_many`` statement and hands the queued put its outcome. Alone, the
queued put is sent at the end of its linger; ``flush_queued`` sends it at
once. Real server, real threads.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rulvar_store import LeaseHeldError
from rulvar_store_postgres import AsyncPostgresStore
from tests.postgres.conftest import StoreFactory

LONG_LINGER_S = 30.0  # longer than any test: only a carrying put or a flush ends it


def test_a_queued_put_rides_the_next_put_of_its_lease(make_store: StoreFactory) -> None:
    """Q19: the put under the same lease carries the queued one; both land."""
    store = make_store()
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    queued = blobs.queue_put("r1/w/a", b"task writes", lease, linger_s=LONG_LINGER_S)
    assert blobs.get("r1/w/a") is None  # queued, not sent
    blobs.put("r1/c/1", b"checkpoint", lease)
    started = time.monotonic()
    assert blobs.await_put(queued) is True
    assert time.monotonic() - started < LONG_LINGER_S / 2
    assert blobs.get("r1/w/a") == b"task writes"
    assert blobs.get("r1/c/1") == b"checkpoint"


def test_queued_puts_keep_their_order(make_store: StoreFactory) -> None:
    """Q19: queued first, written first: the later write of a ref wins."""
    store = make_store()
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    first = blobs.queue_put("r1/x", b"first", lease, linger_s=0.05)
    second = blobs.queue_put("r1/x", b"second", lease, linger_s=LONG_LINGER_S)
    assert blobs.await_put(first) is False  # its linger ended: sent with the second
    assert blobs.await_put(second) is True
    assert blobs.get("r1/x") == b"second"
    third = blobs.queue_put("r1/x", b"third", lease, linger_s=LONG_LINGER_S)
    blobs.put("r1/x", b"fourth", lease)
    assert blobs.await_put(third) is True
    assert blobs.get("r1/x") == b"fourth"


def test_a_lone_queued_put_is_sent_at_the_end_of_its_linger(
    make_store: StoreFactory,
) -> None:
    """Q19: with no put to ride, it is sent alone after the linger."""
    store = make_store()
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    started = time.monotonic()
    queued = blobs.queue_put("r1/w/a", b"alone", lease, linger_s=0.05)
    assert blobs.await_put(queued) is False
    assert time.monotonic() - started >= 0.05
    assert blobs.get("r1/w/a") == b"alone"


def test_a_flush_sends_a_queued_put_at_once(make_store: StoreFactory) -> None:
    """Q19: a reader's flush sends the queued put; its waiter wakes landed."""
    store = make_store()
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    queued = blobs.queue_put("r1/w/a", b"to read", lease, linger_s=LONG_LINGER_S)
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(blobs.await_put(queued)))
    waiter.start()
    blobs.flush_queued()
    assert blobs.get("r1/w/a") == b"to read"
    waiter.join(timeout=LONG_LINGER_S / 2)
    assert outcome == [True]


def test_a_stale_queued_put_is_refused_and_changes_nothing(
    make_store: StoreFactory,
) -> None:
    """Q19 with F2/T7: a superseded lease's queued put is refused at await_put."""
    store = make_store()
    blobs = store.transcripts()
    stale = store.acquire("r1", "me")
    blobs.put("r1/w/a", b"before", stale)
    store.release(stale)
    current = store.acquire("r1", "successor")
    queued = blobs.queue_put("r1/w/a", b"stale", stale, linger_s=0.05)
    blobs.put("r1/c/1", b"current", current)  # another lease: carries nothing
    with pytest.raises(LeaseHeldError):
        blobs.await_put(queued)
    assert blobs.get("r1/w/a") == b"before"
    assert blobs.get("r1/c/1") == b"current"


def test_async_queued_puts_ride_and_a_cancelled_one_is_never_sent(
    pg_url: str, schema: str
) -> None:
    """Q19 on AsyncPostgresStore: carried by the next put of its lease; a waiter
    cancelled before any put took its write leaves nothing behind."""

    async def scenario() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema) as store:
            blobs = store.transcripts()
            lease = await store.acquire("r1", "me")
            queued = await blobs.queue_put("r1/w/a", b"task", lease, LONG_LINGER_S)
            waiter = asyncio.create_task(blobs.await_put(queued))
            await blobs.put("r1/c/1", b"checkpoint", lease)
            assert await asyncio.wait_for(waiter, LONG_LINGER_S / 2) is True
            assert await blobs.get("r1/w/a") == b"task"
            dropped = await blobs.queue_put("r1/w/b", b"never", lease, LONG_LINGER_S)
            cancelled = asyncio.create_task(blobs.await_put(dropped))
            await asyncio.sleep(0.01)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            await blobs.put("r1/c/2", b"later", lease)  # carries nothing now
            await blobs.flush_queued()
            assert await blobs.get("r1/w/b") is None
            assert await blobs.get("r1/c/2") == b"later"

    asyncio.run(scenario())
