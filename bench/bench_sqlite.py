"""SqliteStore throughput beside raw apsw doing the same work, as same-run ratios.

Run: ``python bench/bench_sqlite.py [--reps 5] [--ops 400] [--seconds 2] [--synchronous FULL]``

Absolute figures move between runs of a noisy machine; only the ratios (each taken
inside one repetition, variants interleaved) are compared against the targets:

- fenced append >= 0.75x a raw single-row INSERT inside BEGIN IMMEDIATE;
- load of a 1,000-entry journal >= 0.8x raw SELECT + orjson.loads (the parse
  floor; the stdlib json.loads variant is printed for information);
- 4 processes appending fenced to one file (one run each): aggregate >= 0.7x the
  one-process rate, and the least-served process >= 25 % of the mean share.

``checkpoint put_many`` (no target, printed as a ratio) is the store's share of
a LangGraph checkpoint put: a new 600-byte blob and its thread's pointer blob
overwritten, in one fenced ``put_many``, beside raw apsw running the same
statements (BEGIN IMMEDIATE, the lease SELECT, both upserts, COMMIT) in
alternating chunks. Its gap is the store's own cost per write: argument
checks, the operation and its batch, the file identity ``stat``.
``raw fence SELECT (with / without)`` is raw apsw's same transaction with
the lease SELECT beside it without one: what the fence check itself costs.

Raw variants open their own connection with the same pragmas (WAL, the same
``synchronous``) over a separate file of the same schema.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import apsw
import orjson

from rulvar_store import Lease
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._schema import SCHEMA_DDL

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


def raw_connection(path: str, synchronous: str) -> apsw.Connection:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.set_busy_timeout(5000)
    for statement in SCHEMA_DDL:
        conn.execute(statement)
    return conn


def rate(ops: int, work: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for i in range(ops):
        work(i)
    return ops / (time.perf_counter() - start)


class Pair:
    """One store and one raw connection, each over its own fresh file."""

    def __init__(self, directory: Path, synchronous: str, tag: str) -> None:
        self.store = SqliteStore(
            str(directory / f"store-{tag}.db"),
            synchronous=synchronous,  # type: ignore[arg-type]  # CLI string, validated by the store
        )
        self.raw = raw_connection(str(directory / f"raw-{tag}.db"), synchronous)
        self.cursor = self.raw.cursor()

    def raw_txn(self, statement: str, params: tuple[Any, ...]) -> None:
        cursor = self.cursor
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute(statement, params)
        cursor.execute("COMMIT")

    def close(self) -> None:
        self.store.close()
        self.raw.close()


INSERT = "INSERT INTO entries (run_id, payload) VALUES (?, ?)"
UPSERT_META = (
    "INSERT INTO meta (run_id, payload) VALUES (?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET payload = excluded.payload"
)
TAKE_LEASE = (
    "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
    "epoch = excluded.epoch, expires_at = excluded.expires_at"
)
# The store's statement: an overwrite keeps the row's run_id (the ref's run).
PUT_BLOB = (
    "INSERT INTO blobs (ref, run_id, data) VALUES (?, ?, ?) "
    "ON CONFLICT (ref) DO UPDATE SET data = excluded.data"
)
LIVE_LEASE = (
    "SELECT 1 FROM leases "
    "WHERE run_id = ? AND owner = ? AND epoch = ? AND expires_at > ?"
)
BLOB_CHECKPOINT = os.urandom(600)
LOAD = "SELECT payload FROM entries WHERE run_id = ? ORDER BY id"


def meta(i: int) -> dict[str, Any]:
    return {"runId": "fenced", "status": "running", "updatedAt": f"t{i}"}


def alternating(
    ours: Callable[[int], object], raw: Callable[[int], object], ops: int
) -> tuple[float, float]:
    """(ours ops/s, raw ops/s) over 10 alternating chunks: load swings hit both."""
    spent = [0.0, 0.0]
    size = max(1, ops // 10)
    for chunk in range(10):
        order = ((0, ours), (1, raw)) if chunk % 2 == 0 else ((1, raw), (0, ours))
        for side, work in order:
            began = time.perf_counter()
            for i in range(chunk * size, (chunk + 1) * size):
                work(i)
            spent[side] += time.perf_counter() - began
    return 10 * size / spent[0], 10 * size / spent[1]


def one_rep(pair: Pair, ops: int) -> dict[str, tuple[float, float]]:
    """(store ops/s, raw ops/s) per variant, interleaved inside one repetition."""
    store, blobs, cursor = pair.store, pair.store.transcripts(), pair.cursor
    lease = store.acquire("fenced", "bench")
    out: dict[str, tuple[float, float]] = {}

    raw = rate(ops, lambda i: pair.raw_txn(INSERT, ("raw", json.dumps(entry(i)))))
    ours = rate(ops, lambda i: store.append("fenced", entry(i), lease))
    out["fenced append"] = (ours, raw)

    raw = rate(ops, lambda i: pair.raw_txn(INSERT, ("raw2", json.dumps(entry(i)))))
    ours = rate(ops, lambda i: store.append("unleased", entry(i)))
    out["unleased append"] = (ours, raw)

    raw = rate(
        ops, lambda i: pair.raw_txn(UPSERT_META, ("fenced", json.dumps(meta(i))))
    )
    ours = rate(ops, lambda i: store.put_meta(meta(i), lease))
    out["put_meta (leased)"] = (ours, raw)

    def raw_cycle(i: int) -> None:
        pair.raw_txn(TAKE_LEASE, ("cycle", "bench", i, 1))
        pair.raw_txn("DELETE FROM leases WHERE run_id = ?", ("cycle",))

    raw = rate(ops // 2, raw_cycle)
    ours = rate(ops // 2, lambda i: store.release(store.acquire("cycle", "bench")))
    out["acquire+release"] = (ours, raw)

    # Each put's bytes differ from the blob it overwrites: SQLite leaves a page
    # whose new content equals the old one clean, so rewriting the same bytes
    # commits nothing, syncs nothing, and measured call overhead alone.
    def blob_4k(i: int) -> bytes:
        return i.to_bytes(8, "big") + BLOB_4K[8:]

    out["4 KiB blob put (leased)"] = alternating(
        lambda i: blobs.put(f"fenced/b{i % 16}", blob_4k(i), lease),
        lambda i: pair.raw_txn(PUT_BLOB, (f"fenced/b{i % 16}", "fenced", blob_4k(i))),
        ops,
    )

    pair.raw_txn(TAKE_LEASE, ("fenced", "bench", lease.epoch, 2**62))

    def raw_checkpoint(i: int, tag: str = "ckpt", fenced: bool = True) -> None:
        cursor.execute("BEGIN IMMEDIATE")
        if fenced:
            now = int(time.time() * 1000)
            cursor.execute(LIVE_LEASE, ("fenced", "bench", lease.epoch, now)).fetchall()
        cursor.executemany(
            PUT_BLOB,
            [
                (f"fenced/{tag}/{i:08d}", "fenced", BLOB_CHECKPOINT),
                ("fenced/pointer", "fenced", b"%08d" % i),
            ],
        )
        cursor.execute("COMMIT")

    def store_checkpoint(i: int) -> None:
        blobs.put_many(
            [
                (f"fenced/ckpt/{i:08d}", BLOB_CHECKPOINT),
                ("fenced/pointer", b"%08d" % i),
            ],
            lease,
        )

    out["checkpoint put_many (leased)"] = alternating(
        store_checkpoint, raw_checkpoint, ops
    )
    # What the fence check itself costs: raw apsw with the lease SELECT (the
    # "store" side of this row) beside the same transaction without it.
    out["raw fence SELECT (with / without)"] = alternating(
        partial(raw_checkpoint, tag="with"),
        partial(raw_checkpoint, tag="without", fenced=False),
        ops,
    )

    # A 1,000-entry journal loaded repeatedly, both sides from their own file.
    cursor.execute("BEGIN IMMEDIATE")
    for i in range(1000):
        cursor.execute(INSERT, ("big", json.dumps(entry(i))))
    cursor.execute("COMMIT")
    for i in range(1000):
        store.append("big", entry(i))

    def raw_load(i: int) -> None:
        rows = cursor.execute(LOAD, ("big",)).fetchall()
        [orjson.loads(row[0]) for row in rows]  # type: ignore[arg-type]  # TEXT column

    def raw_load_stdlib(i: int) -> None:
        rows = cursor.execute(LOAD, ("big",)).fetchall()
        [json.loads(row[0]) for row in rows]  # type: ignore[arg-type]  # TEXT column

    loads = max(5, ops // 40)
    # Alternate store and floor several times: load swings on a shared machine
    # then hit both sides alike.
    spent = [0.0, 0.0]
    for chunk in range(6):
        order = ((0, lambda: store.load("big")), (1, lambda: raw_load(0)))
        for side, call in order if chunk % 2 == 0 else tuple(reversed(order)):
            began = time.perf_counter()
            for _ in range(loads):
                call()
            spent[side] += time.perf_counter() - began
    out["load 1,000 entries"] = (6 * loads / spent[0], 6 * loads / spent[1])
    raw = rate(loads, raw_load_stdlib)
    ours = rate(loads, lambda i: store.load("big"))
    out["load 1,000 entries vs json.loads"] = (ours, raw)
    return out


def single_process(
    directory: Path, reps: int, ops: int, synchronous: str
) -> dict[str, list[float]]:
    ratios: dict[str, list[float]] = {}
    rates: dict[str, list[float]] = {}
    for rep in range(reps):
        pair = Pair(directory, synchronous, f"r{rep}")
        try:
            results = one_rep(pair, ops)
        finally:
            pair.close()
        for name, (ours, raw) in results.items():
            rates.setdefault(f"{name} store", []).append(ours)
            rates.setdefault(f"{name} raw", []).append(raw)
            ratios.setdefault(name, []).append(ours / raw)
    for name, values in rates.items():
        print(
            f"  {name:32s} {statistics.median(values):10,.0f} ops/s (median of {reps})"
        )
    return ratios


# -- multi-process -------------------------------------------------------------------


def child(
    path: str, run_id: str, start_at: float, stop_at: float, synchronous: str
) -> None:
    store = SqliteStore(path, synchronous=synchronous)  # type: ignore[arg-type]  # validated
    lease: Lease = store.acquire(run_id, run_id)
    done = 0
    busy = 0
    max_wait = 0.0
    while time.time() < start_at:
        time.sleep(0.0005)
    while time.time() < stop_at:
        began = time.perf_counter()
        try:
            store.append(run_id, entry(done), lease)
        except Exception as exc:  # counted, the run goes on: contention is measured
            if type(exc).__name__ != "StoreBusyError":
                raise
            busy += 1
            continue
        max_wait = max(max_wait, time.perf_counter() - began)
        done += 1
        if done % 200 == 0:
            store.renew(lease)
    store.close()
    print(json.dumps({"done": done, "busy": busy, "max_wait_ms": max_wait * 1000}))


def contention(
    directory: Path, processes: int, seconds: float, synchronous: str, tag: str
) -> list[dict[str, float]]:
    path = str(directory / f"contention-{tag}.db")
    SqliteStore(path, synchronous=synchronous).close()  # type: ignore[arg-type]  # validated
    start_at = time.time() + 1.0 + 0.1 * processes  # after every child has booted
    stop_at = start_at + seconds
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                path,
                f"run-{n}",
                repr(start_at),
                repr(stop_at),
                synchronous,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    results = []
    for proc in children:
        out, _ = proc.communicate(timeout=seconds + 60)
        if proc.returncode != 0:
            raise SystemExit(f"contention child failed with {proc.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--contention-reps", type=int, default=3)
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    parser.add_argument(
        "--child", nargs=5, metavar=("PATH", "RUN", "START", "STOP", "SYNC")
    )
    args = parser.parse_args()
    if args.child:
        path, run_id, start_at, stop_at, synchronous = args.child
        child(path, run_id, float(start_at), float(stop_at), synchronous)
        return

    verdicts: list[tuple[str, bool]] = []
    print(
        f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, "
        f"WAL + synchronous={args.synchronous}, {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory(prefix="rulvar-bench-") as scratch:
        directory = Path(scratch)
        print(f"\nsingle process, {args.reps} reps x {args.ops} ops:")
        ratios = single_process(directory, args.reps, args.ops, args.synchronous)
        print("\nsame-run ratios, store / raw apsw (median [min-max]):")
        targets = {"fenced append": 0.75, "load 1,000 entries": 0.8}
        for name, values in ratios.items():
            median = statistics.median(values)
            line = f"  {name:28s} {median:5.2f}x [{min(values):.2f}-{max(values):.2f}]"
            line += " per rep " + " ".join(f"{value:.2f}" for value in values)
            if name in targets:
                ok = median >= targets[name]
                verdicts.append((f"{name} >= {targets[name]}x raw", ok))
                line += f"   target >= {targets[name]}x: {'PASS' if ok else 'MISS'}"
            print(line)

        print(
            f"\ncontention: fenced appends to one file, one run per process, {args.seconds:g} s:"
        )
        aggregates: list[float] = []
        shares: list[float] = []
        for rep in range(args.contention_reps):
            one = contention(directory, 1, args.seconds, args.synchronous, f"1-{rep}")
            four = contention(directory, 4, args.seconds, args.synchronous, f"4-{rep}")
            one_rate = one[0]["done"] / args.seconds
            counts = [r["done"] for r in four]
            four_rate = sum(counts) / args.seconds
            share = min(counts) / statistics.mean(counts)
            aggregates.append(four_rate / one_rate)
            shares.append(share)
            print(
                f"  rep {rep}: 1 proc {one_rate:,.0f}/s; 4 procs {four_rate:,.0f}/s "
                f"(per process {counts}, busy {[r['busy'] for r in four]}, max wait "
                f"{max(r['max_wait_ms'] for r in four):.1f} ms); aggregate "
                f"{four_rate / one_rate:.2f}x, least served {share:.0%} of the mean"
            )
        if aggregates:  # --contention-reps 0 skips this part
            aggregate, least = statistics.median(aggregates), statistics.median(shares)
            verdicts.append(("4-process aggregate >= 0.7x 1-process", aggregate >= 0.7))
            verdicts.append(
                ("least-served process >= 25% of mean share", least >= 0.25)
            )
            print(f"  median: aggregate {aggregate:.2f}x, least served {least:.0%}")

    print("\ntargets:")
    for name, ok in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {name}")


if __name__ == "__main__":
    main()
