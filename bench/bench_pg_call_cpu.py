"""Client CPU per PostgreSQL store call beside the bare execute of the SAME statement.

Run: ``python bench/bench_pg_call_cpu.py [--url URL] [--chunks 30] [--calls 100]``
(URL defaults to ``RULVAR_TEST_POSTGRES_URL``, then
``postgresql://postgres@127.0.0.1:5432/test``). A fresh schema is created and
dropped at the end.

The store's overhead is what its layers (interrupt deferral, fork check, error
translation, pool checkout, deadline, plans' verdicts) add on top of the driver.
Each figure pairs a store call with ``cursor.execute(step.statement,
step.args).fetchone()`` of the plan the store would send (the same intake, the
same SQL, the same arguments) on the SAME pooled connection (a one-connection
pool), so the server's work and the round trip cancel. The bare side goes
through psycopg's cursor (which prepares a statement after its fifth use); the
store sends its operation calls as statements it prepared itself (``_calls``),
a leaner driver path, so store - bare is the layers' cost minus that saving.
Both sides run in alternating chunks; the client CPU of a chunk is
``time.process_time`` (every thread of the process: the pool's and the
watchdog's too), the wall time ``perf_counter_ns``. Printed per variant: the per-call minimum and median over
the chunks, and the median difference store - bare. The load average is printed
beside the figures: on a shared machine the CPU figures swing with it.

Pairs: sync ``append``, sync blob ``put`` (4 KiB), sync blob ``put_many``
(4 x 4 KiB, one statement), async ``append``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._transcripts import put_many_step

PAD = "x" * 300
BLOB = os.urandom(4096)

Call = Callable[[], None]
AsyncCall = Callable[[], Awaitable[None]]


def entry(seq: int) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"k{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, "pad": PAD},
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(samples: dict[str, list[tuple[float, float]]]) -> None:
    for name, values in samples.items():
        cpu = [c for c, _ in values]
        wall = [w for _, w in values]
        print(
            f"  {name:22s} client cpu/call min {min(cpu):6.1f} us  median "
            f"{statistics.median(cpu):6.1f} us   wall/call median "
            f"{statistics.median(wall):6.1f} us"
        )
    names = list(samples)
    for store_name, bare_name in zip(names[::2], names[1::2], strict=True):
        store_cpu = statistics.median(c for c, _ in samples[store_name])
        bare_cpu = statistics.median(c for c, _ in samples[bare_name])
        print(
            f"  {store_name} - {bare_name}: {store_cpu - bare_cpu:+.1f} us client "
            "cpu per call (medians)"
        )


def run_sync(url: str, chunks: int, calls: int) -> None:
    schema = f"pgcall_cpu_{secrets.token_hex(4)}"
    store = PostgresStore(url, schema=schema, ttl_ms=600_000, pool_max_size=1)
    try:
        store.get_meta("boot")
        lease = store.acquire("r", "bench")
        blobs = store.transcripts()
        pool = store._pool
        conn = pool.getconn()  # the pool's only connection: the store's too
        pool.putconn(conn)
        cursor = conn.cursor()
        plans = store._plans
        counter = [0]

        def nxt() -> int:
            counter[0] += 1
            return counter[0]

        def store_append() -> None:
            store.append("r", entry(nxt()), lease)

        def bare_append() -> None:
            step = plans.append("r", entry(nxt()), lease)
            cursor.execute(step.statement, step.args).fetchone()

        def store_put() -> None:
            blobs.put(f"r/b{nxt() % 50}", BLOB, lease)

        def bare_put() -> None:
            step = plans.blob_put(f"r/b{nxt() % 50}", BLOB, lease)
            cursor.execute(step.statement, step.args).fetchone()

        batch = [(f"r/m{i}", BLOB) for i in range(4)]

        def store_put_many() -> None:
            blobs.put_many(batch, lease)

        def bare_put_many() -> None:
            step = put_many_step(plans, batch, lease)
            assert step is not None
            cursor.execute(step.statement, step.args).fetchone()

        pairs: list[Call] = [
            store_append,
            bare_append,
            store_put,
            bare_put,
            store_put_many,
            bare_put_many,
        ]
        for call in pairs:  # warm: statements prepared, caches filled
            for _ in range(50):
                call()
        samples: dict[str, list[tuple[float, float]]] = {c.__name__: [] for c in pairs}
        for chunk in range(chunks):
            for call in pairs if chunk % 2 == 0 else pairs[::-1]:
                cpu0, wall0 = time.process_time(), time.perf_counter_ns()
                for _ in range(calls):
                    call()
                cpu = (time.process_time() - cpu0) / calls * 1e6
                wall = (time.perf_counter_ns() - wall0) / calls / 1e3
                samples[call.__name__].append((cpu, wall))
        print(f"sync PostgresStore, {chunks} chunks x {calls} calls, load {load()}")
        report(samples)
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def run_async(url: str, chunks: int, calls: int) -> None:
    schema = f"pgcall_acpu_{secrets.token_hex(4)}"
    store = AsyncPostgresStore(url, schema=schema, ttl_ms=600_000, pool_max_size=1)
    try:
        await store.get_meta("boot")
        lease = await store.acquire("r", "bench")
        pool = store._pool
        conn = await pool.getconn()
        await pool.putconn(conn)
        cursor = conn.cursor()
        plans = store._plans
        counter = [0]

        def nxt() -> int:
            counter[0] += 1
            return counter[0]

        async def store_append() -> None:
            await store.append("r", entry(nxt()), lease)

        async def bare_append() -> None:
            step = plans.append("r", entry(nxt()), lease)
            await (await cursor.execute(step.statement, step.args)).fetchone()

        pairs: list[AsyncCall] = [store_append, bare_append]
        for call in pairs:
            for _ in range(50):
                await call()
        samples: dict[str, list[tuple[float, float]]] = {
            f"async_{c.__name__}": [] for c in pairs
        }
        for chunk in range(chunks):
            for call in pairs if chunk % 2 == 0 else pairs[::-1]:
                cpu0, wall0 = time.process_time(), time.perf_counter_ns()
                for _ in range(calls):
                    await call()
                cpu = (time.process_time() - cpu0) / calls * 1e6
                wall = (time.perf_counter_ns() - wall0) / calls / 1e3
                samples[f"async_{call.__name__}"].append((cpu, wall))
        print(f"AsyncPostgresStore, {chunks} chunks x {calls} calls, load {load()}")
        report(samples)
    finally:
        await store.aclose()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "RULVAR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    run_sync(args.url, args.chunks, args.calls)
    asyncio.run(run_async(args.url, args.chunks, args.calls))


if __name__ == "__main__":
    main()
