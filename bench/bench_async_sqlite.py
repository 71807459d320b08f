"""AsyncSqliteStore: coroutines appending through ONE store, beside raw apsw, as ratios.

Run: ``python bench/bench_async_sqlite.py [--reps 5] [--rounds 12] [--slice 0.125]
[--coroutines 8] [--synchronous FULL]``

Five variants, each on its own fresh file, run in short alternating slices
(``--rounds`` x ``--slice`` seconds each per repetition, in rotating order) so
the disk's swings hit all of them alike:

- ``async 1``: one coroutine appends (leased, seq-guarded) to its own run
  through an ``AsyncSqliteStore`` (its own event loop);
- ``async N``: N coroutines append to N runs through the same store;
- ``sync 1``: one thread appends through a ``SqliteStore``;
- ``raw 1`` and ``raw batch N``: raw apsw from one thread, the statements of a
  lone append, one per transaction or N per transaction (the CEILING any group
  commit of N callers can reach on this disk; ``bench_group_commit.RawBatches``).

Printed per repetition and as medians, with the targets (issue 17):

- ``async N / raw batch N`` (absolute rates) and the share of the ceiling
  ``(async N / async 1) / (raw batch N / raw 1)`` (the figure the threaded group
  commit is quoted with): target >= 0.85;
- ``async N / async 1``: target >= 2.5x;
- ``async 1 / sync 1`` (the cost of the hop): target >= 0.8x;
- the longest stall of a 1 ms ticker on the event loop while the N coroutines
  write: target < 5 ms; beside it, the same ticker on an idle loop (``idle
  ticker``) shows what the machine itself stalls.

Last, the medians as microseconds per commit of N appends, async beside raw,
and what 0.85x of raw leaves for everything raw apsw does not pay: each
async batch also waits for two sleeping threads to wake (the loop after the
COMMIT, the worker after the loop has queued the next batch) and runs the
loop's and the worker's Python around the same statements.

Every journal is read back at the end and checked complete and in order.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The project root, so the sibling bench imports as ``bench.bench_group_commit``.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.bench_group_commit import (
    LEASE_TTL_MS,
    RawBatches,
    StoreThreads,
    Timed,
    Variant,
    alternate,
    entry,
    mean_batch,
    rep_file,
    setup_line,
    slice_args,
    spread,
)
from rulvar_store_sqlite import AsyncSqliteStore

TICK_S = 0.001


class IdleTicker:
    """The same 1 ms ticker on a loop with nothing else to do: the machine's own stalls."""

    name = "idle ticker"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.longest_stall_s = 0.0

    def slice(self, seconds: float) -> None:
        self.loop.run_until_complete(self._slice(seconds))

    async def _slice(self, seconds: float) -> None:
        stop_at = time.perf_counter() + seconds
        while time.perf_counter() < stop_at:
            began = time.perf_counter()
            await asyncio.sleep(TICK_S)
            stall = time.perf_counter() - began - TICK_S
            self.longest_stall_s = max(self.longest_stall_s, stall)

    def rate(self) -> float:
        return 0.0

    def check_and_close(self) -> None:
        self.loop.close()


class Coroutines(Timed):
    """One AsyncSqliteStore on its own loop; N coroutines append in timed slices.

    ``ticker`` runs the 1 ms stall ticker beside them; the one-coroutine
    variant runs without it, since it is compared with a sync thread that has
    no ticker to serve either.
    """

    def __init__(
        self,
        name: str,
        path: Path,
        coroutines: int,
        synchronous: str,
        *,
        ticker: bool = True,
    ) -> None:
        super().__init__()
        self.name = name
        self.ticker = ticker
        self.loop = asyncio.new_event_loop()
        self.store = self.loop.run_until_complete(
            AsyncSqliteStore.open(
                str(path), synchronous=synchronous, ttl_ms=LEASE_TTL_MS
            )
        )
        self.leases = [
            self.loop.run_until_complete(self.store.acquire(f"run-{n}", f"w-{n}"))
            for n in range(coroutines)
        ]
        self.seqs = [0] * coroutines
        self.longest_stall_s = 0.0

    def slice(self, seconds: float) -> None:
        self.loop.run_until_complete(self._slice(seconds))

    async def _slice(self, seconds: float) -> None:
        stop_at = time.perf_counter() + seconds

        async def writer(n: int) -> None:
            lease = self.leases[n]
            while time.perf_counter() < stop_at:
                await self.store.append(lease.run_id, entry(self.seqs[n]), lease)
                self.seqs[n] += 1

        async def ticker() -> None:
            while time.perf_counter() < stop_at:
                began = time.perf_counter()
                await asyncio.sleep(TICK_S)
                stall = time.perf_counter() - began - TICK_S
                self.longest_stall_s = max(self.longest_stall_s, stall)

        before = sum(self.seqs)
        began = time.perf_counter()
        tickers = [ticker()] if self.ticker else []
        await asyncio.gather(*tickers, *(writer(n) for n in range(len(self.leases))))
        self.spent += time.perf_counter() - began
        self.done += sum(self.seqs) - before

    def batch(self) -> float:
        return mean_batch(self.store)

    def check_and_close(self) -> None:
        async def check() -> None:
            for n, lease in enumerate(self.leases):
                seqs = [e["seq"] for e in await self.store.load(lease.run_id)]
                assert seqs == list(range(self.seqs[n])), f"run-{n} is incomplete"
            await self.store.aclose()

        self.loop.run_until_complete(check())
        self.loop.close()


def main() -> None:
    args = slice_args(__doc__.splitlines()[0], 12, "coroutines")
    n, sync = args.callers, args.synchronous
    print(setup_line(args))
    absolute: list[float] = []
    shares: list[float] = []
    speedups: list[float] = []
    hops: list[float] = []
    stalls_ms: list[float] = []
    idle_stalls_ms: list[float] = []
    # Microseconds per commit of N appends (async: its mean batch), for the budget line.
    async_commit_us: list[float] = []
    raw_commit_us: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rulvar-async-") as scratch:
        for rep in range(args.reps):
            file = rep_file(scratch, rep)
            one = Coroutines("async 1", file("a1"), 1, sync, ticker=False)
            many = Coroutines(f"async {n}", file("an"), n, sync)
            sync_one = StoreThreads("sync 1", file("s1"), 1, sync, True)
            raw_one = RawBatches("raw 1", file("r1"), sync, 1)
            raw_many = RawBatches(f"raw batch {n}", file("rn"), sync, n)
            idle = IdleTicker()
            variants: list[Variant] = [one, many, sync_one, raw_one, raw_many, idle]
            alternate(variants, args.rounds, args.slice)
            absolute.append(many.rate() / raw_many.rate())
            speedups.append(many.rate() / one.rate())
            shares.append(speedups[-1] / (raw_many.rate() / raw_one.rate()))
            hops.append(one.rate() / sync_one.rate())
            stalls_ms.append(many.longest_stall_s * 1000)
            async_commit_us.append(1e6 * many.batch() / many.rate())
            raw_commit_us.append(1e6 * n / raw_many.rate())
            idle_stalls_ms.append(idle.longest_stall_s * 1000)
            print(
                f"  rep {rep}: async 1 {one.rate():6,.0f}/s | async {n} "
                f"{many.rate():6,.0f}/s (mean batch {many.batch():.1f}) | sync 1 "
                f"{sync_one.rate():6,.0f}/s | raw 1 {raw_one.rate():6,.0f}/s | raw "
                f"batch {n} {raw_many.rate():6,.0f}/s || async {n} / raw batch {n} "
                f"{absolute[-1]:.2f}x, share of ceiling {shares[-1]:.2f}, async {n} / "
                f"async 1 {speedups[-1]:.2f}x, async 1 / sync 1 {hops[-1]:.2f}x, "
                f"longest loop stall {stalls_ms[-1]:.1f} ms (idle loop, same "
                f"machine: {idle_stalls_ms[-1]:.1f} ms)"
            )
            for variant in variants:
                variant.check_and_close()
    verdicts = [
        (
            f"async {n} / raw batch {n} (absolute) >= 0.85x",
            spread(absolute),
            statistics.median(absolute) >= 0.85,
        ),
        (
            "share of the ceiling >= 0.85",
            spread(shares),
            statistics.median(shares) >= 0.85,
        ),
        (
            f"async {n} / async 1 >= 2.5x",
            spread(speedups),
            statistics.median(speedups) >= 2.5,
        ),
        ("async 1 / sync 1 >= 0.8x", spread(hops), statistics.median(hops) >= 0.8),
        (
            "longest 1 ms ticker stall < 5 ms",
            f"{statistics.median(stalls_ms):.1f} ms [{min(stalls_ms):.1f}-"
            f"{max(stalls_ms):.1f}]",
            max(stalls_ms) < 5,
        ),
    ]
    for label, figures, ok in verdicts:
        print(f"median {label}: {figures}: {'PASS' if ok else 'MISS'}")
    raw_us = statistics.median(raw_commit_us)
    print(
        f"  per commit of {n} appends (medians): async {n} "
        f"{statistics.median(async_commit_us):.0f} us, raw batch {n} {raw_us:.0f} us; "
        f"0.85x leaves {raw_us / 0.85 - raw_us:.0f} us per commit for all that raw "
        "apsw does not pay (the two thread wake-ups of each batch, the loop's and "
        "the worker's Python)"
    )
    print(
        "  the same ticker on an idle loop beside them stalled "
        f"{statistics.median(idle_stalls_ms):.1f} ms [{min(idle_stalls_ms):.1f}-"
        f"{max(idle_stalls_ms):.1f}] (the machine's own scheduling, load average "
        f"{os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
