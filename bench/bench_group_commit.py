"""Group commit: threads appending through ONE SqliteStore, as same-run ratios.

Run: ``python bench/bench_group_commit.py [--reps 5] [--seconds 2] [--threads 8]
[--synchronous FULL]``

Per repetition, interleaved, each on a fresh file:

- ``1 thread``: one thread appends (leased, seq-guarded) to its own run;
- ``N threads``: N threads append to N runs through the same store
  (group commit ON, the default);
- ``N threads, group commit off``: the same with ``group_commit=False``
  (one transaction and one WAL flush per append).

Printed per repetition and as medians: aggregate appends/s, the ratio
N threads / 1 thread (TARGET >= 4x at synchronous=FULL with 8 threads), and the
mean batch size (operations per transaction). The journals are read back and
checked complete and ordered after every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import apsw

from rulvar_store_sqlite import SqliteStore


def entry(seq: int) -> dict[str, Any]:
    return {
        "seq": seq,
        "kind": "step",
        "status": "ok",
        "value": {"n": seq, "pad": "x" * 200},
    }


def run(
    path: Path, threads: int, seconds: float, synchronous: str, group_commit: bool
) -> tuple[float, float]:
    """Aggregate appends/s and mean operations per transaction."""
    store = SqliteStore(
        str(path),
        synchronous=synchronous,  # type: ignore[arg-type]  # CLI choice, validated
        group_commit=group_commit,
    )
    leases = [store.acquire(f"run-{n}", f"writer-{n}") for n in range(threads)]
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def writer(n: int) -> None:
        lease = leases[n]
        start.wait()
        seq = 0
        while time.perf_counter() < stop_at[0]:
            store.append(lease.run_id, entry(seq), lease)
            seq += 1
        counts[n] = seq

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    group = store._group
    batches0 = group.batches if group else 0
    ops0 = group.operations if group else 0
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    batch = (
        (group.operations - ops0) / max(1, group.batches - batches0) if group else 1.0
    )
    for n, lease in enumerate(leases):  # complete and ordered, nothing lost
        seqs = [e["seq"] for e in store.load(lease.run_id)]
        assert seqs == list(range(counts[n])), f"run-{n} journal is not 0..{counts[n]}"
    store.close()
    return sum(counts) / elapsed, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    args = parser.parse_args()
    n = args.threads
    print(
        f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, WAL + "
        f"synchronous={args.synchronous}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}; {args.reps} reps x {args.seconds:g} s"
    )
    ratios: list[float] = []
    off_ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rulvar-gc-") as scratch:
        for rep in range(args.reps):
            one, _ = run(
                Path(scratch, f"one-{rep}.db"), 1, args.seconds, args.synchronous, True
            )
            many, batch = run(
                Path(scratch, f"many-{rep}.db"), n, args.seconds, args.synchronous, True
            )
            off, _ = run(
                Path(scratch, f"off-{rep}.db"), n, args.seconds, args.synchronous, False
            )
            ratios.append(many / one)
            off_ratios.append(off / one)
            print(
                f"  rep {rep}: 1 thread {one:7,.0f}/s | {n} threads {many:7,.0f}/s "
                f"(mean batch {batch:.1f}) = {many / one:.2f}x | {n} threads, group "
                f"commit off {off:7,.0f}/s = {off / one:.2f}x"
            )
    median = statistics.median(ratios)
    print(
        f"median: {n} threads / 1 thread = {median:.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
        f"; group commit off {statistics.median(off_ratios):.2f}x"
    )
    print(f"target >= 4x: {'PASS' if median >= 4 else 'MISS'}")


if __name__ == "__main__":
    main()
