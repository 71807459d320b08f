"""Side by side in one run: raw drivers, our stores, LangGraph's checkpoint savers.

Run: ``python bench/bench_side_by_side.py [--reps 5] [--ops 300] [--loads 20]
[--url URL] [--skip-postgres]``

LangGraph is an OPTIONAL benchmark dependency (never a runtime one)::

    pip install 'rulvar-stores[bench]'
    # = langgraph-checkpoint-sqlite langgraph-checkpoint-postgres

Without it the LangGraph rows are skipped (the script says so) and the rest
runs. Per backend and repetition, every variant runs in alternating chunks
(so load swings on a shared machine hit all alike), and ratios are taken
inside the repetition; the summary gives each ratio's median [min-max].

Writes, at equal durability (each side's setting is READ BACK and printed):

- SQLite, WAL + synchronous=FULL (one WAL flush per commit): raw apsw
  ``BEGIN IMMEDIATE; INSERT; COMMIT``; our fenced append (lease check, seq
  guard); ``SqliteSaver.put`` of a small checkpoint (one ~450 B dict channel
  and one int channel), chained to the previous one.
- PostgreSQL, synchronous_commit=on: raw psycopg ``BEGIN; INSERT; COMMIT`` and
  autocommit INSERT; our fenced append; ``PostgresSaver.put``.

Reads: ``load`` of a 1,000-entry journal against the raw SELECT + orjson floor,
and, for scale, the savers' ``get_tuple`` (the latest checkpoint of a thread:
a different operation, one row).
"""

from __future__ import annotations

import argparse
import gc
import os
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import apsw
import orjson

# The project root, so the sibling module imports as ``bench.peer_savers``.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.peer_savers import INSTALL_HINT, langgraph_available
from rulvar_store.backend import dump_record

Op = Callable[[int], object]


def entry(seq: int) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"bench-{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, "pad": "x" * 300},
    }


def interleaved(
    variants: dict[str, Op], ops: int, chunks: int = 10
) -> dict[str, float]:
    """Ops/s of every variant, run in rotating chunks; cyclic GC between chunks."""
    spent = dict.fromkeys(variants, 0.0)
    names = list(variants)
    size = max(1, ops // chunks)
    done = 0
    gc.disable()
    try:
        turn = 0
        while done < ops:
            n = min(size, ops - done)
            order = names[turn % len(names) :] + names[: turn % len(names)]
            for name in order:
                gc.collect()
                op = variants[name]
                began = time.perf_counter()
                for i in range(done, done + n):
                    op(i)
                spent[name] += time.perf_counter() - began
            done += n
            turn += 1
    finally:
        gc.enable()
    return {name: ops / seconds for name, seconds in spent.items()}


class Checkpoints:
    """Chained small checkpoints for one saver thread, as LangGraph's loop writes them."""

    def __init__(self, saver: Any, thread: str) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.saver = saver
        self.empty = empty_checkpoint
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread, "checkpoint_ns": ""}
        }

    def put(self, i: int) -> None:
        checkpoint = self.empty()
        checkpoint["channel_values"] = {"data": entry(i), "n": i}
        checkpoint["channel_versions"] = {"data": i + 1, "n": i + 1}
        self.config = self.saver.put(
            self.config,
            checkpoint,
            {"source": "loop", "step": i},
            {"data": i + 1, "n": i + 1},
        )

    def get(self, i: int) -> None:
        assert self.saver.get_tuple(self.config) is not None


# -- SQLite ---------------------------------------------------------------------------


@contextmanager
def sqlite_side(
    directory: Path, with_langgraph: bool
) -> Iterator[tuple[dict[str, Op], dict[str, Op], list[str]]]:
    from rulvar_store_sqlite import SqliteStore
    from rulvar_store_sqlite._schema import SCHEMA_DDL

    with ExitStack() as stack:
        raw = apsw.Connection(str(directory / "raw.db"))
        stack.callback(raw.close)
        raw.execute("PRAGMA journal_mode=WAL").fetchall()
        raw.execute("PRAGMA synchronous=FULL")
        for statement in SCHEMA_DDL:
            raw.execute(statement)
        store = stack.enter_context(SqliteStore(str(directory / "ours.db")))
        lease = store.acquire("fenced", "bench")
        seqs = count()  # the seq guard wants increasing seqs across all calls
        settings = [
            "raw apsw: journal_mode={} synchronous={}".format(
                raw.execute("PRAGMA journal_mode").fetchall()[0][0],
                raw.execute("PRAGMA synchronous").fetchall()[0][0],
            ),
            "SqliteStore: journal_mode={} synchronous={}".format(
                store._conn.execute("PRAGMA journal_mode").fetchall()[0][0],
                store._conn.execute("PRAGMA synchronous").fetchall()[0][0],
            ),
        ]
        insert = "INSERT INTO entries (run_id, payload) VALUES (?, ?)"

        def raw_insert(i: int) -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(insert, ("raw", dump_record(entry(i))))
            raw.execute("COMMIT")

        writes: dict[str, Op] = {
            "raw apsw insert": raw_insert,
            "our fenced append": lambda i: store.append(
                "fenced", entry(next(seqs)), lease
            ),
        }
        with raw:
            for i in range(1000):
                raw.execute(insert, ("big", dump_record(entry(i))))
        for i in range(1000):
            store.append("big", entry(i))

        def floor(i: int) -> None:
            rows = raw.execute(
                "SELECT payload FROM entries WHERE run_id = ? ORDER BY id", ("big",)
            ).fetchall()
            assert len([orjson.loads(row[0]) for row in rows]) == 1000  # type: ignore[arg-type]

        reads: dict[str, Op] = {
            "raw SELECT + orjson": floor,
            "our load": lambda i: store.load("big"),
        }
        if with_langgraph:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(
                str(directory / "langgraph.db"), check_same_thread=False
            )
            stack.callback(conn.close)
            saver = SqliteSaver(conn)
            saver.setup()
            settings.append(
                "SqliteSaver (stdlib sqlite3 {}): journal_mode={} synchronous={}".format(
                    sqlite3.sqlite_version,
                    conn.execute("PRAGMA journal_mode").fetchone()[0],
                    conn.execute("PRAGMA synchronous").fetchone()[0],
                )
            )
            chain = Checkpoints(saver, "bench")
            chain.put(0)
            writes["SqliteSaver.put"] = chain.put
            reads["SqliteSaver.get_tuple (1 row)"] = chain.get
        yield writes, reads, settings


# -- PostgreSQL -----------------------------------------------------------------------


@contextmanager
def postgres_side(
    url: str, with_langgraph: bool
) -> Iterator[tuple[dict[str, Op], dict[str, Op], list[str]]]:
    import psycopg

    from rulvar_store_postgres import PostgresStore

    schema = f"rulvar_sbs_{secrets.token_hex(4)}"
    q = f'"{schema}"'
    with ExitStack() as stack:
        admin = psycopg.connect(url, autocommit=True)
        stack.callback(admin.close)
        stack.callback(admin.execute, f"DROP SCHEMA IF EXISTS {q} CASCADE")
        store = stack.enter_context(PostgresStore(url, schema=schema, ttl_ms=600_000))
        lease = store.acquire("fenced", "bench")
        seqs = count()  # the seq guard wants increasing seqs across all calls
        raw = psycopg.connect(url, autocommit=True)
        stack.callback(raw.close)

        def show(conn: Any) -> str:
            def value(statement: str) -> object:
                row = conn.execute(statement).fetchone()
                # The saver's connection returns dict rows.
                return next(iter(row.values())) if isinstance(row, dict) else row[0]

            sync, fsync = value("SHOW synchronous_commit"), value("SHOW fsync")
            return f"synchronous_commit={sync} fsync={fsync}"

        with store._pool.checkout() as pooled:
            ours = show(pooled)
        settings = [f"raw psycopg: {show(raw)}", f"PostgresStore: {ours}"]
        insert = f"INSERT INTO {q}.rulvar_entries (run_id, payload) VALUES (%s, %s)"

        def raw_txn(i: int) -> None:
            with raw.transaction():
                raw.execute(insert, ("raw", dump_record(entry(i))))

        writes: dict[str, Op] = {
            "raw psycopg BEGIN/INSERT/COMMIT": raw_txn,
            "raw psycopg autocommit INSERT": lambda i: raw.execute(
                insert, ("raw-ac", dump_record(entry(i)))
            ),
            "our fenced append": lambda i: store.append(
                "fenced", entry(next(seqs)), lease
            ),
        }
        big = store.acquire("big", "bench")
        for i in range(1000):
            store.append("big", entry(i), big)
        select = f"SELECT payload FROM {q}.rulvar_entries WHERE run_id = %s ORDER BY id"

        def floor(i: int) -> None:
            rows = raw.execute(select, ("big",)).fetchall()
            assert len([orjson.loads(row[0]) for row in rows]) == 1000

        reads: dict[str, Op] = {
            "raw SELECT + orjson": floor,
            "our load": lambda i: store.load("big"),
        }
        if with_langgraph:
            from langgraph.checkpoint.postgres import PostgresSaver

            # The saver's tables go into our throwaway schema.
            lg_url = (
                url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"
            )
            saver = stack.enter_context(PostgresSaver.from_conn_string(lg_url))
            saver.setup()
            settings.append(f"PostgresSaver: {show(saver.conn)}")
            chain = Checkpoints(saver, "bench")
            chain.put(0)
            writes["PostgresSaver.put"] = chain.put
            reads["PostgresSaver.get_tuple (1 row)"] = chain.get
        yield writes, reads, settings


# -- report ---------------------------------------------------------------------------


def measure(
    title: str,
    side: Any,
    reps: int,
    ops: int,
    loads: int,
    ratio_pairs: list[tuple[str, str]],
) -> None:
    print(f"\n== {title}")
    rates: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    with side as (writes, reads, settings):
        for line in settings:
            print(f"  durability read back: {line}")
        interleaved(writes, max(10, ops // 10))  # warm-up: statements, pools
        for rep in range(reps):
            got = interleaved(writes, ops) | interleaved(reads, loads, chunks=5)
            for name, value in got.items():
                rates.setdefault(name, []).append(value)
            cells = []
            for mine, theirs in ratio_pairs:
                if mine in got and theirs in got:
                    key = f"{mine} / {theirs}"
                    ratios.setdefault(key, []).append(got[mine] / got[theirs])
                    cells.append(f"{key} {got[mine] / got[theirs]:.2f}x")
            print(f"  rep {rep}: " + "; ".join(cells))
    print("  rates (ops/s, median [min-max]):")
    for name, values in rates.items():
        print(
            f"    {name:36s} {statistics.median(values):9,.0f} "
            f"[{min(values):,.0f}-{max(values):,.0f}]"
        )
    print("  ratios (median [min-max]):")
    for key, values in ratios.items():
        print(
            f"    {key:66s} {statistics.median(values):5.2f}x [{min(values):.2f}-{max(values):.2f}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    with_langgraph = langgraph_available()
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; apsw "
        f"{apsw.apsw_version()} (SQLite {apsw.sqlite_lib_version()}); "
        f"{args.reps} reps x {args.ops} writes, {args.loads} loads per variant"
    )
    if not with_langgraph:
        print(f"{INSTALL_HINT}; their rows are skipped")
    with tempfile.TemporaryDirectory(prefix="rulvar-sbs-") as scratch:
        measure(
            "SQLite, WAL + synchronous=FULL",
            sqlite_side(Path(scratch), with_langgraph),
            args.reps,
            args.ops,
            args.loads,
            [
                ("our fenced append", "raw apsw insert"),
                ("our fenced append", "SqliteSaver.put"),
                ("SqliteSaver.put", "raw apsw insert"),
                ("our load", "raw SELECT + orjson"),
            ],
        )
    if not args.skip_postgres:
        measure(
            "PostgreSQL, synchronous_commit=on",
            postgres_side(args.url, with_langgraph),
            args.reps,
            args.ops,
            args.loads,
            [
                ("our fenced append", "raw psycopg BEGIN/INSERT/COMMIT"),
                ("our fenced append", "raw psycopg autocommit INSERT"),
                ("our fenced append", "PostgresSaver.put"),
                ("PostgresSaver.put", "raw psycopg autocommit INSERT"),
                ("our load", "raw SELECT + orjson"),
            ],
        )


if __name__ == "__main__":
    main()
