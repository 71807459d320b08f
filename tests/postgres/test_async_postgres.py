"""AsyncPostgresStore: the PostgreSQL store for asyncio callers, on a real server.

It shares the sync store's plans, SQL and error translation, so these tests
pin what is its own: the registry's native opener, concurrency on the async
pool, cancellation (a cancelled caller never leaves a write half-done or a
pooled connection inside a transaction) and refusal after a fork.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Final

import psycopg
import pytest

from rulvar_store import ForkedStoreError, is_async_store, open_store_async
from rulvar_store.backend import (
    Failpoint,
    caller_identity,
    mark_caller,
    set_failpoint_hook,
)
from rulvar_store.errors import ConfigError, LeaseHeldError, StoreClosedError
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

pytestmark = pytest.mark.postgres

PAUSE_S: Final = 10.0  # a bound only: the test lets the pause go at once


@pytest.mark.clause("L7")
def test_the_registry_opens_the_native_async_store(pg_url: str, schema: str) -> None:
    """open_store_async gives AsyncPostgresStore and its twin; a round of every call works."""

    async def main() -> None:
        async with open_store_async(f"{pg_url}?schema={schema}") as opened:
            store, blobs = opened.journal, opened.transcripts
            assert isinstance(store, AsyncPostgresStore)
            assert is_async_store(store)
            assert is_async_store(blobs)
            lease = await store.acquire("r", "w")
            await store.append("r", {"seq": 0}, lease)
            first = await store.load_since("r")
            await store.append("r", {"seq": 1}, lease)
            await store.put_meta({"runId": "r", "status": "running"}, lease)
            await blobs.put("r/ckpt", b"x", lease)
            assert await store.load("r") == [{"seq": 0}, {"seq": 1}]
            assert (await store.load_since("r", first.cursor)).entries == [{"seq": 1}]
            assert await store.get_meta("r") == {"runId": "r", "status": "running"}
            assert [m["runId"] for m in await store.list_runs()] == ["r"]
            assert await blobs.list_refs("r") == ["r/ckpt"]
            assert await blobs.get("r/ckpt") == b"x"
            await store.renew(lease)
            await store.release(lease)

    asyncio.run(main())


@pytest.mark.clause("L7")
def test_a_superseded_async_writer_is_refused(pg_url: str, schema: str) -> None:
    """A takeover through the sync store fences the async holder's writes (same format)."""

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema, ttl_ms=1000) as store:
            lease = await store.acquire("r", "old")
            with PostgresStore(
                pg_url, schema=schema, ttl_ms=1000, now=lambda: 10**15
            ) as sync:
                sync.acquire("r", "new")
            with pytest.raises(LeaseHeldError):
                await store.append("r", {"seq": 0}, lease)
            with pytest.raises(LeaseHeldError):
                await store.transcripts().put("r/b", b"x", lease)
            assert await store.load("r") == []

    asyncio.run(main())


@pytest.mark.clause("P7")
def test_sixteen_tasks_write_sixteen_runs_concurrently(
    pg_url: str, schema: str
) -> None:
    """No lock serializes the pool: 16 tasks' appends all land, each run in order."""

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=16) as store:

            async def writer(n: int) -> None:
                lease = await store.acquire(f"run-{n}", f"w{n}")
                for seq in range(5):
                    await store.append(f"run-{n}", {"seq": seq}, lease)

            await asyncio.gather(*(writer(n) for n in range(16)))
            for n in range(16):
                assert [e["seq"] for e in await store.load(f"run-{n}")] == list(
                    range(5)
                )

    asyncio.run(main())


def _in_transaction(admin: psycopg.Connection[Any], schema: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        "'rulvar-store-postgres' AND state LIKE 'idle in transaction%%' "
        "AND query LIKE %s",
        (f'%"{schema}"%',),
    ).fetchone()
    return 0 if row is None else int(row[0])


@pytest.mark.clause("Y2")
@pytest.mark.clause("Y3")
def test_a_cancelled_append_ends_before_its_caller_resumes_and_lands_whole(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """The caller gets CancelledError only once the write is over; all stays usable.

    A plain connection holds the run's lock, so the append is in flight on the
    server when its caller is cancelled: the caller must stay suspended until the
    lock goes and the append commits (Y2), then no pooled connection is left in
    a transaction and both this handle and a second one write at once (Y3).
    """

    async def main() -> None:
        async with AsyncPostgresStore(
            pg_url, schema=schema, lock_timeout_ms=5000
        ) as store:
            await store.append("r", {"seq": 0})
            with psycopg.connect(pg_url) as holder:
                holder.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 8214))",
                    (f"{schema}:r",),
                )
                task = asyncio.create_task(store.append("r", {"seq": 1}))
                while _waiting_for_lock(admin, schema) == 0:
                    await asyncio.sleep(0.01)  # the call reaches the server's lock wait
                task.cancel()
                for _ in range(20):
                    await asyncio.sleep(0)
                assert not task.done(), "the caller resumed while its call still ran"
                holder.rollback()  # the lock goes; the call commits, then ends
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await store.load("r") == [{"seq": 0}, {"seq": 1}]
            assert _in_transaction(admin, schema) == 0
            await store.append("r", {"seq": 2})
            with PostgresStore(pg_url, schema=schema) as other:
                other.append("r", {"seq": 3})  # a second handle writes at once
            assert [e["seq"] for e in await store.load("r")] == [0, 1, 2, 3]

    asyncio.run(main())


def _waiting_for_lock(admin: psycopg.Connection[Any], schema: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        "'rulvar-store-postgres' AND wait_event_type = 'Lock' AND query LIKE %s",
        (f'%"{schema}"%',),
    ).fetchone()
    return 0 if row is None else int(row[0])


@pytest.mark.clause("Y5")
def test_a_failpoint_pause_holds_up_only_its_own_caller(
    pg_url: str, schema: str
) -> None:
    """A hook pausing one task inside its transaction leaves the event loop running.

    The kit pauses a write at a failpoint and races other calls against it on
    the same loop; a hook run on the loop thread would stop them all (and let
    the server end the paused transaction as idle). Here another task appends
    while the aimed one stands at ``after-begin``, and only then is the pause let
    go: the pause must end released, not timed out, and both writes land.
    """
    reached, go = threading.Event(), threading.Event()
    released: list[bool] = []

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema) as store:
            await store.append("other", {"seq": 0})  # booted before the hook is in
            aimed: dict[str, object] = {}

            def hook(operation: str, point: Failpoint) -> None:
                if caller_identity() is aimed.get("me") and point == "after-begin":
                    reached.set()
                    released.append(go.wait(PAUSE_S))

            async def paused_append() -> None:
                aimed["me"] = mark_caller()
                await store.append("paused", {"seq": 0})

            previous = set_failpoint_hook(hook)
            try:
                paused = asyncio.create_task(paused_append())
                assert await asyncio.to_thread(reached.wait, PAUSE_S)
                await store.append("other", {"seq": 1})  # not held up by the pause
                go.set()
                await paused
            finally:
                go.set()
                set_failpoint_hook(previous)
            assert released == [True]
            assert await store.load("paused") == [{"seq": 0}]
            assert await store.load("other") == [{"seq": 0}, {"seq": 1}]

    asyncio.run(main())


@pytest.mark.clause("J1")
def test_cancelling_many_writers_at_random_moments_keeps_writes_whole(
    pg_url: str, schema: str
) -> None:
    """Each cancelled append is all or nothing; later appends of every run still work."""

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema) as store:

            async def writer(n: int) -> None:
                for seq in range(1000):
                    await store.append(f"c-{n}", {"seq": seq, "n": n})

            tasks = [asyncio.create_task(writer(n)) for n in range(8)]
            await asyncio.sleep(0.5)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(0.2)  # shielded calls finish on their own
            for n in range(8):
                entries = await store.load(f"c-{n}")
                assert entries == [{"seq": s, "n": n} for s in range(len(entries))]
                await store.append(f"c-{n}", {"seq": len(entries), "n": n})

    asyncio.run(main())


@pytest.mark.clause("P7")
def test_a_forked_child_refuses_typed_and_the_parent_keeps_working(
    pg_url: str, schema: str
) -> None:
    """The child gets ForkedStoreError without touching the pool; the parent is unharmed."""
    store = PostgresStore(pg_url, schema=schema)
    store.append("r", {"seq": 0})
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = b"?"
        try:
            store.append("r", {"seq": 99})
        except ForkedStoreError:
            code = b"F"
        except BaseException:
            code = b"X"
        store.close()  # must not close the parent's sockets
        os.write(write, code)
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"F"
    os.close(read)
    store.append("r", {"seq": 1})
    assert store.load("r") == [{"seq": 0}, {"seq": 1}]
    store.close()


@pytest.mark.clause("P1")
def test_async_settings_errors_are_typed(pg_url: str) -> None:
    """The same intake: bad options and impossible settings are ConfigErrors."""
    with pytest.raises(ConfigError):
        AsyncPostgresStore(pg_url, schema="bad-name")

    async def main() -> None:
        store = AsyncPostgresStore(f"{pg_url}?sslmode=bogus")
        with pytest.raises(ConfigError):
            await store.get_meta("r")
        await store.aclose()
        with pytest.raises(StoreClosedError):
            await store.get_meta("r")

    asyncio.run(main())
