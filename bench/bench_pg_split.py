"""Where one fenced append's time goes, beside a raw autocommit INSERT: server CPU, client CPU, wall.

Run: ``python bench/bench_pg_split.py [--url URL] [--rounds 11] [--calls 200]
[--async-commit]`` (URL defaults to ``RULVAR_TEST_POSTGRES_URL``, then
``postgresql://postgres@127.0.0.1:5432/test``). A fresh schema is created and
dropped at the end. The server must run on this host: its CPU is read from
``/proc/<backend pid>/schedstat`` (nanoseconds on CPU), so each figure is the
backend's own work per call, whatever else the machine runs.

Variants, each on its own connection, in rotating chunks of ``--calls``:

- ``raw``: ``INSERT INTO rulvar_entries (run_id, payload) VALUES (%s, %s)``
  through psycopg (prepared), the payload encoded with ``json.dumps``: the
  baseline of issue 17's target (one round trip, one commit);
- ``function``: the same fenced append the store sends (``_plans.append``:
  intake, statement, arguments), executed through that same psycopg path, so
  ``function - raw`` is the server function's cost with the client held equal;
- ``store``: ``PostgresStore.append`` (pool of one);
- ``araw`` and ``astore``: the raw INSERT through psycopg's asyncio connection,
  and ``AsyncPostgresStore.append``.

Printed per variant: medians over the chunks of server CPU, client CPU
(``time.process_time``, every thread of this process) and wall per call, and
raw wall / variant wall (the ratio issue 17 targets: >= 0.8x). ``araw``'s ratio
is the most an asyncio store could reach against the sync raw INSERT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

PAD = "x" * 300


def entry(seq: int) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"bench-{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, "pad": PAD},
    }


def text(seq: int) -> str:
    return json.dumps(entry(seq), ensure_ascii=False, separators=(",", ":"))


def server_cpu_s(pid: int) -> float:
    """Seconds the backend ``pid`` has spent on a CPU (``/proc/<pid>/schedstat``)."""
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e9


def require_local(pid: int) -> None:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            name = comm.read().strip()
    except OSError:
        name = ""
    if not name.startswith("postgres"):
        raise SystemExit(
            f"backend pid {pid} is not a local postgres process: this bench reads "
            "the server's CPU from /proc and needs the server on this host"
        )


Chunk = Callable[[int], None]


class Split:
    def __init__(self, url: str) -> None:
        self.url = url
        self.schema = f"rulvar_split_{secrets.token_hex(4)}"
        self.seq = 0
        self.loop = asyncio.new_event_loop()
        # Session settings the store gives its own connections (``_schema``).
        options = "-c plan_cache_mode=force_generic_plan"
        self.raw = psycopg.connect(
            url, autocommit=True, prepare_threshold=0, options=options
        )
        self.bare = psycopg.connect(
            url, autocommit=True, prepare_threshold=0, options=options
        )
        self.store = PostgresStore(
            url, schema=self.schema, ttl_ms=600_000, pool_max_size=1
        )
        self.astore = AsyncPostgresStore(
            url, schema=self.schema, ttl_ms=600_000, pool_max_size=1
        )
        self.araw = self.loop.run_until_complete(
            psycopg.AsyncConnection.connect(
                url, autocommit=True, prepare_threshold=0, options=options
            )
        )
        self.insert = (
            f'INSERT INTO "{self.schema}".rulvar_entries (run_id, payload) '
            "VALUES (%s, %s)"
        )

    def close(self) -> None:
        self.store.close()
        self.loop.run_until_complete(self.astore.aclose())
        self.loop.run_until_complete(self.araw.close())
        self.loop.close()
        self.bare.close()
        self.raw.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        self.raw.close()

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def variants(self) -> dict[str, tuple[Chunk, int]]:
        """Each variant's chunk runner and the pid of the backend serving it."""
        store, astore, loop = self.store, self.astore, self.loop
        lease = store.acquire("store", "bench")  # boots the schema
        bare_lease = store.acquire("function", "bench")
        alease = loop.run_until_complete(astore.acquire("astore", "bench"))
        plans = store._plans

        def raw(calls: int) -> None:
            for _ in range(calls):
                self.raw.execute(self.insert, ("raw", text(self.next_seq())))

        def function(calls: int) -> None:
            for _ in range(calls):
                step = plans.append("function", entry(self.next_seq()), bare_lease)
                self.bare.execute(step.statement, step.args).fetchone()

        def sync_store(calls: int) -> None:
            for _ in range(calls):
                store.append("store", entry(self.next_seq()), lease)

        async def araw_calls(calls: int) -> None:
            for _ in range(calls):
                await self.araw.execute(self.insert, ("araw", text(self.next_seq())))

        async def astore_calls(calls: int) -> None:
            for _ in range(calls):
                await astore.append("astore", entry(self.next_seq()), alease)

        conn = store._pool.getconn()  # the pool's only connection
        store_pid = conn.info.backend_pid
        store._pool.putconn(conn)

        async def astore_pid() -> int:
            conn = await astore._pool.getconn()
            await astore._pool.putconn(conn)
            return conn.info.backend_pid

        return {
            "raw": (raw, self.raw.info.backend_pid),
            "function": (function, self.bare.info.backend_pid),
            "store": (sync_store, store_pid),
            "araw": (
                lambda n: loop.run_until_complete(araw_calls(n)),
                self.araw.info.backend_pid,
            ),
            "astore": (
                lambda n: loop.run_until_complete(astore_calls(n)),
                loop.run_until_complete(astore_pid()),
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="diagnostic: synchronous_commit=off on every side, so the commit's "
        "flush wait stops hiding the CPU figures",
    )
    args = parser.parse_args()
    url = args.url
    if args.async_commit:
        sep = "&" if "?" in url else "?"
        url = f"{url}{sep}options=-c%20synchronous_commit%3Doff"

    split = Split(url)
    try:
        variants = split.variants()
        for run, pid in variants.values():
            require_local(pid)
            run(100)  # warm: statements prepared, caches filled
        samples: dict[str, list[tuple[float, float, float]]] = {
            name: [] for name in variants
        }
        names = list(variants)
        for turn in range(args.rounds):
            shift = turn % len(names)
            for name in names[shift:] + names[:shift]:
                run, pid = variants[name]
                server0, client0 = server_cpu_s(pid), time.process_time()
                wall0 = time.perf_counter()
                run(args.calls)
                wall = time.perf_counter() - wall0
                per_call = 1e6 / args.calls
                samples[name].append(
                    (
                        (server_cpu_s(pid) - server0) * per_call,
                        (time.process_time() - client0) * per_call,
                        wall * per_call,
                    )
                )
    finally:
        split.close()

    commit = "synchronous_commit=off (diagnostic)" if args.async_commit else "durable"
    print(
        f"one fenced append vs a raw autocommit INSERT, {args.rounds} rounds x "
        f"{args.calls} calls, {commit}, load {os.getloadavg()[0]:.2f}; "
        "medians per call"
    )
    raw_wall = statistics.median(wall for _, _, wall in samples["raw"])
    for name, values in samples.items():
        server = statistics.median(s for s, _, _ in values)
        client = statistics.median(c for _, c, _ in values)
        wall = statistics.median(w for _, _, w in values)
        print(
            f"  {name:9s} server cpu {server:6.1f} us  client cpu {client:6.1f} us  "
            f"wall {wall:6.1f} us  raw/this {raw_wall / wall:4.2f}x"
        )


if __name__ == "__main__":
    main()
