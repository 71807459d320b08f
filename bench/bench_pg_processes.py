"""PostgreSQL: N processes x 8 runs each appending, aggregate vs one process.

Run: ``python bench/bench_pg_processes.py [--url URL] [--reps 3] [--seconds 3]
[--processes 8] [--runs 8]``

Each process (a fresh interpreter, started before the clock) opens its own
``PostgresStore`` on one shared schema, leases its ``--runs`` runs and appends
fenced, seq-guarded entries to them round-robin until the deadline. Per
repetition: 1 process, then ``--processes`` processes, interleaved; printed are
the aggregate appends/s, the ratio N/1, and the least and most served process.
Every journal is read back and checked complete and ordered.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time

import psycopg

from rulvar_store_postgres import PostgresStore


def child(url: str, schema: str, tag: str, runs: int) -> None:
    store = PostgresStore(url, schema=schema, ttl_ms=600_000, pool_max_size=2)
    leases = [store.acquire(f"{tag}-{n}", tag) for n in range(runs)]
    counts = [0] * runs
    print("ready", flush=True)  # set up: the parent starts the clock when all are
    start_at, stop_at = (float(value) for value in sys.stdin.readline().split())
    while time.time() < start_at:
        time.sleep(0.0005)
    done = 0
    while time.time() < stop_at:
        n = done % runs
        store.append(leases[n].run_id, {"seq": counts[n], "kind": "step"}, leases[n])
        counts[n] += 1
        done += 1
    for n in range(runs):
        assert [e["seq"] for e in store.load(f"{tag}-{n}")] == list(range(counts[n]))
    store.close()
    print(json.dumps({"done": done}))


def round_of(
    url: str, schema: str, processes: int, runs: int, seconds: float, rep: int
) -> list[int]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                url,
                schema,
                f"r{rep}p{processes}c{n}",
                str(runs),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for proc in procs:  # every child connected and leased its runs
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    start_at = time.time() + 0.2
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at!r} {start_at + seconds!r}\n")
        proc.stdin.flush()
    counts = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode != 0:
            raise SystemExit(f"child failed with {proc.returncode}")
        counts.append(json.loads(out.strip().splitlines()[-1])["done"])
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--child", nargs=4)
    args = parser.parse_args()
    if args.child:
        url, schema, tag, runs = args.child
        child(url, schema, tag, int(runs))
        return
    schema = f"rulvar_procs_{secrets.token_hex(4)}"
    PostgresStore(args.url, schema=schema).get_meta("boot")
    with psycopg.connect(args.url, autocommit=True) as conn:
        sync = conn.execute("SHOW synchronous_commit").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; server "
        f"synchronous_commit={sync[0] if sync else '?'}, fsync={fsync[0] if fsync else '?'}; "
        f"{args.reps} reps x {args.seconds:g} s, {args.runs} runs per process"
    )
    ratios: list[float] = []
    try:
        for rep in range(args.reps):
            one = round_of(args.url, schema, 1, args.runs, args.seconds, rep)
            many = round_of(
                args.url, schema, args.processes, args.runs, args.seconds, rep
            )
            one_rate, many_rate = one[0] / args.seconds, sum(many) / args.seconds
            ratios.append(many_rate / one_rate)
            print(
                f"  rep {rep}: 1 process {one_rate:7,.0f}/s | {args.processes} processes "
                f"{many_rate:7,.0f}/s = {many_rate / one_rate:.2f}x (per process "
                f"min {min(many) / args.seconds:,.0f}/s, max {max(many) / args.seconds:,.0f}/s)"
            )
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(
        f"median {args.processes} processes / 1 process: {statistics.median(ratios):.2f}x "
        f"[{min(ratios):.2f}-{max(ratios):.2f}]"
    )


if __name__ == "__main__":
    main()
