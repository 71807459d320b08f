"""The cost of the async adapter's hop: one coroutine's append against the sync store's.

Run: ``python bench/bench_async_hop.py [--reps 5] [--ops 300]``

Per repetition, on one SQLite file at WAL + synchronous=FULL (the URL option,
validated by the store), in alternating chunks so load swings on a shared machine hit both
alike: the sync ``SqliteStore.append`` from one thread, and the same append
awaited by one coroutine through ``open_store_async`` (the generic adapter:
one worker-thread hop per call). Prints the ratio async/sync per repetition
and the median; the issue's target is >= 0.8x. Also the 8-coroutine
aggregate (8 runs, one handle) against one coroutine, the group commit the
adapter lets the sync store do.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from rulvar_store import AsyncJournalStore, Lease, open_store, open_store_async

CHUNK = 50


async def _async_rates(url: str, ops: int) -> tuple[float, float, float]:
    """(sync ops/s, one coroutine ops/s, 8 coroutines ops/s)."""
    sync_s = async_s = 0.0
    with open_store(url) as sync_opened:
        sync = sync_opened.journal
        assert hasattr(sync, "acquire")
        sync_lease: Lease = sync.acquire("sync-run", "bench")
        async with open_store_async(url) as opened:
            journal = opened.journal
            assert hasattr(journal, "acquire")
            lease: Lease = await journal.acquire("async-run", "bench")
            seq = 0
            for _ in range(ops // CHUNK):
                started = time.perf_counter()
                for offset in range(CHUNK):
                    sync.append("sync-run", {"seq": seq + offset}, sync_lease)
                sync_s += time.perf_counter() - started
                started = time.perf_counter()
                for offset in range(CHUNK):
                    await journal.append("async-run", {"seq": seq + offset}, lease)
                async_s += time.perf_counter() - started
                seq += CHUNK
            fan_s = await _eight(journal, ops)
    done = (ops // CHUNK) * CHUNK
    return done / sync_s, done / async_s, 8 * done / fan_s


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
    args = parser.parse_args()
    ratios, fans = [], []
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'hop.db'}?synchronous=FULL"
            sync_rate, async_rate, fan_rate = asyncio.run(_async_rates(url, args.ops))
        ratio, fan = async_rate / sync_rate, fan_rate / async_rate
        ratios.append(ratio)
        fans.append(fan)
        print(
            f"rep {rep + 1}: sync {sync_rate:7.0f}/s  one coroutine {async_rate:7.0f}/s "
            f"({ratio:.2f}x sync)  8 coroutines {fan_rate:7.0f}/s ({fan:.2f}x one)"
        )
    print(
        f"median: one coroutine {statistics.median(ratios):.2f}x sync "
        f"[{min(ratios):.2f}-{max(ratios):.2f}]; 8 coroutines "
        f"{statistics.median(fans):.2f}x one [{min(fans):.2f}-{max(fans):.2f}]"
    )


if __name__ == "__main__":
    main()
