"""AsyncPostgresStore beside raw psycopg async and LangGraph's AsyncPostgresSaver, same run.

Run: ``python bench/bench_async_postgres.py [--url URL] [--reps 5] [--ops 40]``
(URL defaults to ``RULVAR_TEST_POSTGRES_URL``, then
``postgresql://postgres@127.0.0.1:5432/test``). Fresh schemas are created and
dropped at the end. Every commit is durable (``synchronous_commit`` as the
server has it, on) on every side, so durability is equal.

Figures (ratio = rulvar rate / other rate in the same repetition, the sides
run one after the other in alternating order; medians over the repetitions):

- 16 tasks on 16 runs, ``--ops`` fenced appends each, through ONE
  AsyncPostgresStore (pool of 16) vs raw psycopg async: an
  ``AsyncConnectionPool`` of 16, each task running the same single-row INSERT
  transaction (``async with conn.transaction(): INSERT``) per write.
  TARGET >= 0.9x.
- the same 16 tasks vs ``AsyncPostgresSaver.aput`` (one saver on a pool of 16,
  one thread per task, one checkpoint per write). TARGET >= 2x.
- one connection, one caller: the sync and the async fenced append vs a raw
  autocommit single-row INSERT (one round trip each). TARGET >= 0.8x. The
  four variants (store and raw, sync and async) run in rotating chunks of
  ``--single-ops``/10 so load swings hit all alike. The async append is given
  against the sync raw INSERT (the target as written) and, for the cost of the
  store alone, against the same INSERT through psycopg's async connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

# The project root, so the sibling module imports as ``bench.peer_savers``.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.peer_savers import require_langgraph_savers
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

TASKS = 16
PAD = "x" * 300


def entry(seq: int) -> dict[str, Any]:
    return {"hashVersion": 2, "seq": seq, "kind": "step", "value": {"pad": PAD}}


class Bench:
    def __init__(self, url: str, ops: int) -> None:
        self.url = url
        self.ops = ops
        self.schema = f"rulvar_abench_{secrets.token_hex(4)}"
        self.lg_schema = f"{self.schema}_lg"
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    async def open(self) -> None:
        self.store = AsyncPostgresStore(
            self.url, schema=self.schema, ttl_ms=600_000, pool_max_size=TASKS
        )
        await self.store.get_meta("boot")
        self.raw = AsyncConnectionPool(
            self.url,
            min_size=TASKS,
            max_size=TASKS,
            kwargs={"autocommit": True},
            open=False,
        )
        await self.raw.open(wait=True)
        async with await psycopg.AsyncConnection.connect(
            self.url, autocommit=True
        ) as conn:
            await conn.execute(f'CREATE SCHEMA "{self.lg_schema}"')
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        sep = "&" if "?" in self.url else "?"
        lg_url = f"{self.url}{sep}options=-c%20search_path%3D{self.lg_schema}"
        self.lg_pool = AsyncConnectionPool(
            lg_url,
            min_size=TASKS,
            max_size=TASKS,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0,
                "row_factory": dict_row,
            },
            open=False,
        )
        await self.lg_pool.open(wait=True)
        self.saver = AsyncPostgresSaver(self.lg_pool)  # type: ignore[arg-type, unused-ignore]  # its pool type: an error under some langgraph-checkpoint-postgres releases, none under others
        await self.saver.setup()

    async def close(self) -> None:
        await self.store.aclose()
        await self.raw.close()
        await self.lg_pool.close()
        async with await psycopg.AsyncConnection.connect(
            self.url, autocommit=True
        ) as conn:
            for schema in (self.schema, self.lg_schema):
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    # -- 16 tasks -----------------------------------------------------------------

    async def store_tasks(self) -> float:
        runs = [self.fresh("s") for _ in range(TASKS)]
        leases = [await self.store.acquire(run, "bench") for run in runs]

        async def task(n: int) -> None:
            for seq in range(self.ops):
                await self.store.append(runs[n], entry(seq), leases[n])

        return await self._rate(task)

    async def raw_tasks(self) -> float:
        sql = f'INSERT INTO "{self.schema}".rulvar_entries (run_id, payload) VALUES (%s, %s)'
        runs = [self.fresh("raw") for _ in range(TASKS)]

        async def task(n: int) -> None:
            for seq in range(self.ops):
                text = json.dumps(entry(seq), separators=(",", ":"))
                async with self.raw.connection() as conn, conn.transaction():
                    await conn.execute(sql, (runs[n], text))

        return await self._rate(task)

    async def langgraph_tasks(self) -> float:
        from langgraph.checkpoint.base import empty_checkpoint

        threads = [self.fresh("lg") for _ in range(TASKS)]

        async def task(n: int) -> None:
            config: Any = {
                "configurable": {"thread_id": threads[n], "checkpoint_ns": ""}
            }
            for seq in range(self.ops):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"value": entry(seq)}
                checkpoint["channel_versions"] = {"value": seq + 1}
                config = await self.saver.aput(
                    config, checkpoint, {"step": seq}, {"value": seq + 1}
                )

        return await self._rate(task)

    async def _rate(self, task: Callable[[int], Awaitable[None]]) -> float:
        started = time.perf_counter()
        await asyncio.gather(*(task(n) for n in range(TASKS)))
        return TASKS * self.ops / (time.perf_counter() - started)

    # -- one connection -------------------------------------------------------------

    async def one_connection(
        self,
        sync_store: PostgresStore,
        async_store: AsyncPostgresStore,
        raw: psycopg.Connection[Any],
        araw: psycopg.AsyncConnection[Any],
        n: int,
    ) -> dict[str, float]:
        """Appends/s of each variant on one connection, in rotating chunks."""
        sql = f'INSERT INTO "{self.schema}".rulvar_entries (run_id, payload) VALUES (%s, %s)'
        run_sync, run_async = self.fresh("s1"), self.fresh("a1")
        run_raw, run_araw = self.fresh("r1"), self.fresh("ar1")
        lease_sync = sync_store.acquire(run_sync, "bench")
        lease_async = await async_store.acquire(run_async, "bench")

        async def store_sync(seq: int) -> None:
            sync_store.append(run_sync, entry(seq), lease_sync)

        async def store_async(seq: int) -> None:
            await async_store.append(run_async, entry(seq), lease_async)

        async def raw_sync(seq: int) -> None:
            raw.execute(sql, (run_raw, json.dumps(entry(seq), separators=(",", ":"))))

        async def raw_async(seq: int) -> None:
            text = json.dumps(entry(seq), separators=(",", ":"))
            await araw.execute(sql, (run_araw, text))

        variants: dict[str, Callable[[int], Awaitable[None]]] = {
            "sync": store_sync,
            "async": store_async,
            "raw": raw_sync,
            "araw": raw_async,
        }
        spent = dict.fromkeys(variants, 0.0)
        names, chunks = list(variants), 10
        size = max(1, n // chunks)
        for turn in range(chunks):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                started = time.perf_counter()
                for seq in range(turn * size, (turn + 1) * size):
                    await variants[name](seq)
                spent[name] += time.perf_counter() - started
        return {name: chunks * size / seconds for name, seconds in spent.items()}


async def run(url: str, reps: int, ops: int, single_ops: int) -> None:
    bench = Bench(url, ops)
    await bench.open()
    ratios: dict[str, list[float]] = {}
    sync_store = PostgresStore(
        url, schema=bench.schema, ttl_ms=600_000, pool_max_size=1
    )
    one = AsyncPostgresStore(url, schema=bench.schema, ttl_ms=600_000, pool_max_size=1)
    raw_conn = psycopg.connect(url, autocommit=True)
    araw_conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        # Warm-up: prepared statements, pools, the saver's tables.
        await bench.store_tasks()
        await bench.raw_tasks()
        await bench.langgraph_tasks()
        await bench.one_connection(sync_store, one, raw_conn, araw_conn, 50)
        for rep in range(reps):
            order = ["store", "raw", "langgraph"]
            if rep % 2:
                order.reverse()
            rates: dict[str, float] = {}
            for side in order:
                if side == "store":
                    rates[side] = await bench.store_tasks()
                elif side == "raw":
                    rates[side] = await bench.raw_tasks()
                else:
                    rates[side] = await bench.langgraph_tasks()
            ratios.setdefault("16 tasks: store / raw async pool", []).append(
                rates["store"] / rates["raw"]
            )
            ratios.setdefault("16 tasks: store / LangGraph aput", []).append(
                rates["store"] / rates["langgraph"]
            )
            one_conn = await bench.one_connection(
                sync_store, one, raw_conn, araw_conn, single_ops
            )
            ratios.setdefault("1 conn: sync append / raw autocommit INSERT", []).append(
                one_conn["sync"] / one_conn["raw"]
            )
            ratios.setdefault(
                "1 conn: async append / raw autocommit INSERT", []
            ).append(one_conn["async"] / one_conn["raw"])
            ratios.setdefault(
                "1 conn: async append / raw async autocommit INSERT", []
            ).append(one_conn["async"] / one_conn["araw"])
            print(
                f"rep {rep + 1}: 16 tasks store {rates['store']:.0f}/s raw "
                f"{rates['raw']:.0f}/s langgraph {rates['langgraph']:.0f}/s; one conn "
                f"sync {one_conn['sync']:.0f}/s async {one_conn['async']:.0f}/s "
                f"raw {one_conn['raw']:.0f}/s raw async {one_conn['araw']:.0f}/s",
                flush=True,
            )
    finally:
        sync_store.close()
        await one.aclose()
        raw_conn.close()
        await araw_conn.close()
        await bench.close()
    targets = {
        "16 tasks: store / raw async pool": 0.9,
        "16 tasks: store / LangGraph aput": 2.0,
        "1 conn: sync append / raw autocommit INSERT": 0.8,
        "1 conn: async append / raw autocommit INSERT": 0.8,
        "1 conn: async append / raw async autocommit INSERT": 0.8,
    }
    print(f"ratios per repetition ({reps} reps), median, target (durable commits):")
    for name, values in ratios.items():
        median = statistics.median(values)
        verdict = "PASS" if median >= targets[name] else "MISS"
        each = " ".join(f"{value:.2f}" for value in values)
        print(
            f"  {name:<46} {each}  median {median:.2f}x  {verdict} (>= {targets[name]}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=40, help="appends per task")
    parser.add_argument("--single-ops", type=int, default=300)
    args = parser.parse_args()
    require_langgraph_savers()
    asyncio.run(run(args.url, args.reps, args.ops, args.single_ops))


if __name__ == "__main__":
    main()
