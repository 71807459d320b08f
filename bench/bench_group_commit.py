"""Group commit: threads appending through ONE SqliteStore, as same-run ratios.

Run: ``python bench/bench_group_commit.py [--reps 5] [--rounds 16] [--slice 0.125]
[--threads 8] [--synchronous FULL]``

Three variants, each on its own fresh file, run in short alternating slices
(``--rounds`` x ``--slice`` seconds each per repetition, in rotating order), so
the disk's flush rate, which other processes on a shared machine swing by 10x
within seconds, hits all of them alike:

- ``1 thread``: one thread appends (leased, seq-guarded) to its own run;
- ``N threads``: N threads append to N runs through the same store
  (group commit ON, the default);
- ``N threads, group commit off``: the same with ``group_commit=False`` (one
  transaction and one WAL flush per append).

Printed per repetition and as medians: appends/s, the ratio N threads /
1 thread (TARGET >= 4x at synchronous=FULL with 8 threads) and the mean batch
(operations per transaction). Every journal is read back at the end and
checked complete and in order.
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


class Variant:
    """One store and its writer threads' runs; runs timed slices of appends."""

    def __init__(
        self, path: Path, threads: int, synchronous: str, group_commit: bool
    ) -> None:
        self.store = SqliteStore(
            str(path),
            synchronous=synchronous,  # type: ignore[arg-type]  # CLI choice, validated
            group_commit=group_commit,
        )
        self.threads = threads
        self.leases = [
            self.store.acquire(f"run-{n}", f"writer-{n}") for n in range(threads)
        ]
        self.seqs = [0] * threads
        self.done = 0
        self.spent = 0.0

    def slice(self, seconds: float) -> None:
        barrier = threading.Barrier(self.threads + 1)
        stop_at = [0.0]

        def writer(n: int) -> None:
            lease = self.leases[n]
            barrier.wait()
            while time.perf_counter() < stop_at[0]:
                self.store.append(lease.run_id, entry(self.seqs[n]), lease)
                self.seqs[n] += 1

        before = sum(self.seqs)
        workers = [
            threading.Thread(target=writer, args=(n,)) for n in range(self.threads)
        ]
        for worker in workers:
            worker.start()
        stop_at[0] = time.perf_counter() + seconds
        began = time.perf_counter()
        barrier.wait()
        for worker in workers:
            worker.join()
        self.spent += time.perf_counter() - began
        self.done += sum(self.seqs) - before

    def rate(self) -> float:
        return self.done / self.spent

    def batch(self) -> float:
        group = self.store._group
        return group.operations / max(1, group.batches) if group else 1.0

    def check_and_close(self) -> None:
        for n, lease in enumerate(self.leases):  # complete and ordered, nothing lost
            seqs = [e["seq"] for e in self.store.load(lease.run_id)]
            assert seqs == list(range(self.seqs[n])), (
                f"run-{n} is not 0..{self.seqs[n]}"
            )
        self.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--slice", type=float, default=0.125)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    args = parser.parse_args()
    n = args.threads
    print(
        f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, WAL + "
        f"synchronous={args.synchronous}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; {args.reps} reps x {args.rounds} rounds x "
        f"{args.slice:g} s per variant"
    )
    ratios: list[float] = []
    off_ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rulvar-gc-") as scratch:
        for rep in range(args.reps):
            one = Variant(Path(scratch, f"one-{rep}.db"), 1, args.synchronous, True)
            many = Variant(Path(scratch, f"many-{rep}.db"), n, args.synchronous, True)
            off = Variant(Path(scratch, f"off-{rep}.db"), n, args.synchronous, False)
            variants = [one, many, off]
            for turn in range(args.rounds):
                for variant in variants[turn % 3 :] + variants[: turn % 3]:
                    variant.slice(args.slice)
            ratios.append(many.rate() / one.rate())
            off_ratios.append(off.rate() / one.rate())
            print(
                f"  rep {rep}: 1 thread {one.rate():7,.0f}/s | {n} threads "
                f"{many.rate():7,.0f}/s (mean batch {many.batch():.1f}) = "
                f"{ratios[-1]:.2f}x | {n} threads, group commit off "
                f"{off.rate():7,.0f}/s = {off_ratios[-1]:.2f}x"
            )
            for variant in variants:
                variant.check_and_close()
    median = statistics.median(ratios)
    print(
        f"median: {n} threads / 1 thread = {median:.2f}x [{min(ratios):.2f}-"
        f"{max(ratios):.2f}]; group commit off {statistics.median(off_ratios):.2f}x"
    )
    print(f"target >= 4x: {'PASS' if median >= 4 else 'MISS'}")


if __name__ == "__main__":
    main()
