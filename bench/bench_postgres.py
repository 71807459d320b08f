"""PostgresStore throughput beside raw psycopg doing the same work, as same-run ratios.

Run: ``python bench/bench_postgres.py [--url URL] [--reps 5] [--ops 300] [--async-commit]``
(URL defaults to ``RULVAR_TEST_POSTGRES_URL``, then
``postgresql://postgres@127.0.0.1:5432/test``). A fresh schema is created and
dropped at the end.

What is measured (ratio = store ops/s / raw ops/s, > 1 means the store is faster;
see the note at the end):

- fenced append (leased, J6-guarded, advisory-locked: one server function call
  in autocommit = 1 round trip) vs the raw baseline: a single-row INSERT of the
  same payload into the same table in its own transaction, written the psycopg
  way ``with conn.transaction(): conn.execute(INSERT)`` (BEGIN, INSERT, COMMIT =
  3 round trips). TARGET >= 1.0x (PASS/MISS printed). For information the raw
  autocommit INSERT (1 round trip, no fence, no lock) is printed too;
- leased put_meta vs raw ``INSERT ... ON CONFLICT DO UPDATE`` in a transaction;
- acquire + release vs raw: lease-row upsert then delete, each in a transaction;
- leased 4 KiB blob put vs raw upsert of the blob in a transaction;
- load of a 1,000-entry journal vs raw ``SELECT payload ... ORDER BY id`` +
  ``orjson.loads`` of every row (the parse floor; TARGET >= 0.8x), and for
  information vs the same SELECT + ``json.loads``.

Both sides of a pair run in alternating chunks of ops/30 (so load swings on a
shared machine hit both alike); the printed ratio is total store rate over total
raw rate across all repetitions, with the per-repetition range beside it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

import orjson
import psycopg

from rulvar_store_postgres import PostgresStore

PAYLOAD_PAD = "x" * 300
BLOB_4K = os.urandom(4096)


def entry(seq: int) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"bench-{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, "pad": PAYLOAD_PAD},
    }


Op = Callable[[int], None]


def paired_rates(store_op: Op, raw_op: Op, ops: int, chunk: int) -> tuple[float, float]:
    """Ops/s of both sides, run in alternating chunks so load swings hit both alike.

    The cyclic GC is paused inside the timed chunks and run between them (as
    ``timeit`` does): its cadence follows allocation counts, so with strict
    alternation it would land on the same side every time.
    """
    spent = [0.0, 0.0]
    done = 0
    gc.disable()
    try:
        while done < ops:
            n = min(chunk, ops - done)
            first_store = (done // chunk) % 2 == 0
            order = (
                ((0, store_op), (1, raw_op))
                if first_store
                else ((1, raw_op), (0, store_op))
            )
            for side, op in order:
                gc.collect()
                started = time.perf_counter()
                for i in range(done, done + n):
                    op(i)
                spent[side] += time.perf_counter() - started
            done += n
    finally:
        gc.enable()
    return ops / spent[0], ops / spent[1]


class Bench:
    def __init__(self, url: str, ops: int) -> None:
        self.url = url
        self.ops = ops
        self.schema = f"rulvar_bench_{secrets.token_hex(4)}"
        self.q = f'"{self.schema}"'
        self.store = PostgresStore(url, schema=self.schema, ttl_ms=600_000)
        self.store.get_meta("boot")  # boot outside the timings
        self.raw = psycopg.connect(url, autocommit=True)
        self.counter = 0

    def close(self) -> None:
        self.store.close()
        self.raw.execute(f"DROP SCHEMA IF EXISTS {self.q} CASCADE")
        self.raw.close()

    def fresh_run(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    # -- variants: each sets up and returns its per-operation callable -------------

    def store_append(self) -> Op:
        run = self.fresh_run("append")
        lease = self.store.acquire(run, "bench")
        return lambda i: self.store.append(run, entry(i), lease)

    def raw_append_tx(self) -> Op:
        run = self.fresh_run("raw-append")
        sql = f"INSERT INTO {self.q}.rulvar_entries (run_id, payload) VALUES (%s, %s)"

        def op(i: int) -> None:
            text = json.dumps(entry(i), ensure_ascii=False, separators=(",", ":"))
            with self.raw.transaction():
                self.raw.execute(sql, (run, text))

        return op

    def raw_append_autocommit(self) -> Op:
        run = self.fresh_run("raw-append-ac")
        sql = f"INSERT INTO {self.q}.rulvar_entries (run_id, payload) VALUES (%s, %s)"

        def op(i: int) -> None:
            text = json.dumps(entry(i), ensure_ascii=False, separators=(",", ":"))
            self.raw.execute(sql, (run, text))

        return op

    def store_put_meta(self) -> Op:
        run = self.fresh_run("meta")
        lease = self.store.acquire(run, "bench")
        return lambda i: self.store.put_meta(
            {"runId": run, "status": "running", "segments": i}, lease
        )

    def raw_put_meta(self) -> Op:
        run = self.fresh_run("raw-meta")
        sql = (
            f"INSERT INTO {self.q}.rulvar_meta (run_id, payload) VALUES (%s, %s) "
            "ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload"
        )

        def op(i: int) -> None:
            text = json.dumps({"runId": run, "status": "running", "segments": i})
            with self.raw.transaction():
                self.raw.execute(sql, (run, text))

        return op

    def store_acquire_release(self) -> Op:
        run = self.fresh_run("lease")

        def op(i: int) -> None:
            self.store.release(self.store.acquire(run, "bench"))

        return op

    def raw_acquire_release(self) -> Op:
        run = self.fresh_run("raw-lease")
        upsert = (
            f"INSERT INTO {self.q}.rulvar_leases (run_id, owner, epoch, expires_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET "
            "owner = EXCLUDED.owner, epoch = EXCLUDED.epoch, expires_at = EXCLUDED.expires_at"
        )
        delete = f"DELETE FROM {self.q}.rulvar_leases WHERE run_id = %s"

        def op(i: int) -> None:
            with self.raw.transaction():
                self.raw.execute(upsert, (run, "bench", i + 1, 2**40))
            with self.raw.transaction():
                self.raw.execute(delete, (run,))

        return op

    def store_blob_put(self) -> Op:
        run = self.fresh_run("blob")
        lease = self.store.acquire(run, "bench")
        twin = self.store.transcripts()
        return lambda i: twin.put(f"{run}/b{i % 8}", BLOB_4K, lease)

    def raw_blob_put(self) -> Op:
        run = self.fresh_run("raw-blob")
        sql = (
            f"INSERT INTO {self.q}.rulvar_blobs (ref, run_id, data) VALUES (%s, %s, %s) "
            "ON CONFLICT (ref) DO UPDATE SET run_id = EXCLUDED.run_id, data = EXCLUDED.data"
        )

        def op(i: int) -> None:
            with self.raw.transaction():
                self.raw.execute(sql, (f"{run}/b{i % 8}", run, BLOB_4K))

        return op

    def prepare_journal(self) -> str:
        run = self.fresh_run("journal")
        lease = self.store.acquire(run, "bench")
        for i in range(1000):
            self.store.append(run, entry(i), lease)
        return run

    def store_load(self, run: str) -> Op:
        def op(i: int) -> None:
            assert len(self.store.load(run)) == 1000

        return op

    def raw_load(self, run: str) -> Op:
        sql = (
            f"SELECT payload FROM {self.q}.rulvar_entries WHERE run_id = %s ORDER BY id"
        )

        def op(i: int) -> None:
            rows = self.raw.execute(sql, (run,)).fetchall()
            assert len([orjson.loads(row[0]) for row in rows]) == 1000

        return op

    def raw_load_stdlib(self, run: str) -> Op:
        sql = (
            f"SELECT payload FROM {self.q}.rulvar_entries WHERE run_id = %s ORDER BY id"
        )

        def op(i: int) -> None:
            rows = self.raw.execute(sql, (run,)).fetchall()
            assert len([json.loads(row[0]) for row in rows]) == 1000

        return op


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="diagnostic: synchronous_commit=off on BOTH sides, so commit flush "
        "latency (one per transaction on each side) stops hiding round-trip costs",
    )
    args = parser.parse_args()
    url = args.url
    if args.async_commit:
        sep = "&" if "?" in url else "?"
        url = f"{url}{sep}options=-c%20synchronous_commit%3Doff"

    bench = Bench(url, args.ops)
    ratios: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}

    def record(name: str, store_rate: float, raw_rate: float) -> None:
        ratios.setdefault(name, []).append(store_rate / raw_rate)
        rates.setdefault(name + " store", []).append(store_rate)
        rates.setdefault(name + " raw", []).append(raw_rate)

    try:
        journal = bench.prepare_journal()
        # Warm up prepared statements and the pool on both sides.
        paired_rates(bench.store_append(), bench.raw_append_tx(), 50, 25)
        for _rep in range(args.reps):
            pairs: list[tuple[str, Callable[[], Op], Callable[[], Op], int]] = [
                ("fenced append", bench.store_append, bench.raw_append_tx, args.ops),
                (
                    "fenced append vs raw autocommit INSERT",
                    bench.store_append,
                    bench.raw_append_autocommit,
                    args.ops,
                ),
                (
                    "put_meta (leased)",
                    bench.store_put_meta,
                    bench.raw_put_meta,
                    args.ops,
                ),
                (
                    "acquire+release",
                    bench.store_acquire_release,
                    bench.raw_acquire_release,
                    args.ops,
                ),
                (
                    "blob put 4 KiB (leased)",
                    bench.store_blob_put,
                    bench.raw_blob_put,
                    args.ops,
                ),
                (
                    "load 1,000 entries",
                    lambda: bench.store_load(journal),
                    lambda: bench.raw_load(journal),
                    args.loads,
                ),
                (
                    "load 1,000 entries vs json.loads",
                    lambda: bench.store_load(journal),
                    lambda: bench.raw_load_stdlib(journal),
                    args.loads,
                ),
            ]
            for name, store_setup, raw_setup, ops in pairs:
                store_rate, raw_rate = paired_rates(
                    store_setup(), raw_setup(), ops, max(1, ops // 30)
                )
                record(name, store_rate, raw_rate)
    finally:
        bench.close()

    commit = (
        "synchronous_commit=off (diagnostic)"
        if args.async_commit
        else "durable commits"
    )
    print(
        f"PostgresStore vs raw psycopg, {args.reps} reps x {args.ops} ops, {commit}; "
        "ratio = store/raw over all reps [per-rep range]"
    )
    for name, values in ratios.items():
        # Time-weighted over all reps: total ops / total time on each side.
        store_rate = len(values) / sum(1 / r for r in rates[name + " store"])
        raw_rate = len(values) / sum(1 / r for r in rates[name + " raw"])
        ratio = store_rate / raw_rate
        spread = f"[{min(values):.2f}-{max(values):.2f}] per rep " + " ".join(
            f"{value:.2f}" for value in values
        )
        line = (
            f"  {name:<40} store {store_rate:7.0f}/s  raw {raw_rate:7.0f}/s  "
            f"ratio {ratio:5.2f}x {spread}"
        )
        if name == "fenced append":
            line += "  " + ("PASS" if ratio >= 1.0 else "MISS") + " (target >= 1.0x)"
        if name == "load 1,000 entries":
            median = sorted(values)[len(values) // 2]
            line += (
                f"  median {median:.2f}x "
                + ("PASS" if median >= 0.8 else "MISS")
                + " (target >= 0.8x)"
            )
        print(line)


if __name__ == "__main__":
    main()
