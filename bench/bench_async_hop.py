"""The cost of the asyncio hop: one coroutine's append against the sync store's.

Run: ``python bench/bench_async_hop.py [--reps 5] [--ops 300] [--warm 1000]
[--synchronous FULL]``

Per repetition, on SQLite files at WAL + synchronous=FULL (the URL option,
validated by the store; ``--synchronous NORMAL`` drops the per-commit flush,
so the hop's own microseconds show without a busy disk's noise), in short alternating chunks (in rotating order) so
load swings on a shared machine hit every variant alike:

- ``sync``: ``SqliteStore.append`` from the calling thread;
- ``one coroutine``: the same append awaited through ``open_store_async``,
  which for SQLite is the native ``AsyncSqliteStore`` (the door's worker
  thread leads the write, the caller's loop is resumed after the COMMIT);
- ``bare hop``: the sync store's append handed to a plain thread through a
  ``SimpleQueue`` and resumed with one ``call_soon_threadsafe``: the least any
  asyncio store that keeps SQLite off the loop thread adds to the sync append
  (two thread wake-ups and two loop turns), measured rather than assumed.

Each variant's file is first warmed with ``--warm`` untimed appends (its own
variant's, so its thread and caches are warm too). A fresh file's WAL grows
by about four pages per append until the first checkpoint (at 1000 pages,
some 250 appends), and while it grows each COMMIT also extends the file, so
its flush carries the file system's metadata too: about twice the steady
state's COMMIT (450-600 us against 250-300 us on a quiet disk here). Timed
from a fresh file, the 300 appends measured mostly that growth, which a
long-lived store pays once, and diluted the hop's fixed cost in a COMMIT
twice as slow as the steady state's. 1000 appends go well past the first
checkpoint: the WAL is then reused from its start (no growth), and
checkpoints recur as they do in steady use.

Prints per repetition the ratios one coroutine / sync (the issue's target is
>= 0.8x), bare hop / sync and one coroutine / bare hop (what the store adds
to the least any such hop costs: 1.00x means nothing), and the medians; also
the 8-coroutine aggregate (8 runs, one handle) against one coroutine, the
group commit the store's door gives concurrent coroutines.

Why one coroutine sits at the bare hop, not above it: its loop has nothing
else to do, so it is asleep in its selector whenever its write commits, and
the worker is asleep whenever the next write is posted. Each call therefore
wakes two sleeping threads (each a cross-CPU wake-up where idle CPUs halt at
once, as in a VM without halt polling) and turns the loop once through its
self-pipe; no way of resuming the caller that keeps SQLite off the loop
thread avoids them without spinning a CPU, which would fight the caller for
the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rulvar_store import AsyncJournalStore, Lease, open_store, open_store_async

# Appends per variant before switching to the next: small, so a burst of
# another process's disk traffic falls on all three variants, not on one.
CHUNK = 10


class BareHop:
    """A plain thread running posted calls, each resumed on its caller's loop."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()

    async def run(self, call: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def job() -> None:
            call()
            loop.call_soon_threadsafe(future.set_result, None)

        self.jobs.put(job)
        await future

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()


async def _rates(
    folder: Path, ops: int, synchronous: str, warm: int
) -> tuple[float, float, float, float]:
    """(sync ops/s, one coroutine ops/s, bare hop ops/s, 8 coroutines ops/s)."""
    chunks = ops // CHUNK
    warm_chunks = warm // CHUNK
    with (
        open_store(_url(folder, "sync", synchronous)) as sync_opened,
        open_store(_url(folder, "bare", synchronous)) as bare_opened,
    ):
        sync, bare = sync_opened.journal, bare_opened.journal
        assert hasattr(sync, "acquire")
        assert hasattr(bare, "acquire")
        sync_lease: Lease = sync.acquire("sync-run", "bench")
        bare_lease: Lease = bare.acquire("bare-run", "bench")
        hop = BareHop()
        async with open_store_async(_url(folder, "async", synchronous)) as opened:
            journal = opened.journal
            assert hasattr(journal, "acquire")
            lease: Lease = await journal.acquire("async-run", "bench")

            async def sync_chunk(first: int) -> None:
                for seq in range(first, first + CHUNK):
                    sync.append("sync-run", {"seq": seq}, sync_lease)

            async def async_chunk(first: int) -> None:
                for seq in range(first, first + CHUNK):
                    await journal.append("async-run", {"seq": seq}, lease)

            async def bare_chunk(first: int) -> None:
                for seq in range(first, first + CHUNK):
                    await hop.run(
                        partial(bare.append, "bare-run", {"seq": seq}, bare_lease)
                    )

            variants = [sync_chunk, async_chunk, bare_chunk]
            for chunk in range(warm_chunks):  # untimed: past the first checkpoint
                for variant in variants:
                    await variant(chunk * CHUNK)
            spent = [0.0, 0.0, 0.0]
            for chunk in range(warm_chunks, warm_chunks + chunks):
                # Each chunk starts with the next variant: no variant always
                # follows the same one (the disk's state after a flush differs).
                for offset in range(3):
                    which = (chunk + offset) % 3
                    started = time.perf_counter()
                    await variants[which](chunk * CHUNK)
                    spent[which] += time.perf_counter() - started
            fan_s = await _eight(journal, ops)
        hop.stop()
    done = chunks * CHUNK
    sync_s, async_s, bare_s = spent
    return done / sync_s, done / async_s, done / bare_s, 8 * done / fan_s


def _url(folder: Path, name: str, synchronous: str) -> str:
    return f"sqlite:///{folder / name}.db?synchronous={synchronous}"


async def _eight(journal: AsyncJournalStore, ops: int) -> float:
    leases = [await journal.acquire(f"fan-{n}", "bench") for n in range(8)]  # type: ignore[attr-defined]  # sqlite is leasable

    async def writer(n: int) -> None:
        for seq in range((ops // CHUNK) * CHUNK):
            await journal.append(f"fan-{n}", {"seq": seq}, leases[n])

    started = time.perf_counter()
    await asyncio.gather(*(writer(n) for n in range(8)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument(
        "--warm", type=int, default=1000, help="untimed appends per file first"
    )
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    args = parser.parse_args()
    print(
        f"WAL + synchronous={args.synchronous}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}; {args.warm} untimed appends "
        f"per file, then {args.ops} timed"
    )
    ratios, bares, overs, fans = [], [], [], []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory() as folder:
            sync_rate, async_rate, bare_rate, fan_rate = asyncio.run(
                _rates(Path(folder), args.ops, args.synchronous, args.warm)
            )
        ratio, bare, fan = (
            async_rate / sync_rate,
            bare_rate / sync_rate,
            fan_rate / async_rate,
        )
        ratios.append(ratio)
        bares.append(bare)
        overs.append(async_rate / bare_rate)
        fans.append(fan)
        print(
            f"rep {rep + 1}: sync {sync_rate:5.0f}/s  one coroutine {async_rate:5.0f}/s "
            f"({ratio:.2f}x sync)  bare hop {bare_rate:5.0f}/s ({bare:.2f}x sync; "
            f"one coroutine {overs[-1]:.2f}x it)  "
            f"8 coroutines {fan_rate:6.0f}/s ({fan:.2f}x one)"
        )
    print(
        f"median: one coroutine {statistics.median(ratios):.2f}x sync "
        f"[{min(ratios):.2f}-{max(ratios):.2f}] (target >= 0.8x); bare hop "
        f"{statistics.median(bares):.2f}x sync [{min(bares):.2f}-{max(bares):.2f}]; "
        f"one coroutine {statistics.median(overs):.2f}x bare hop "
        f"[{min(overs):.2f}-{max(overs):.2f}]; "
        f"8 coroutines {statistics.median(fans):.2f}x one "
        f"[{min(fans):.2f}-{max(fans):.2f}]; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
