"""Crash-fast takeover and loss notice, per backend: printed, never asserted.

Run: ``python bench/bench_takeover.py [--backends sqlite,postgres] [--reps 5]``
(PostgreSQL: ``--url``, else ``RULVAR_TEST_POSTGRES_URL``, else the local server).

Two figures (targets of issue 35):

- **takeover**: a child process takes a run's lease (ttl 30 s) and idles; it is
  SIGKILLed, and the parent polls ``acquire`` (every 2 ms) until granted, then
  makes one leased append: the time from the SIGKILL to that append's
  acknowledgement. Target < 1 s; before crash-fast takeover it was the ttl.
- **loss notice**: an asyncio ``LeaseKeeper`` holds a lease (ttl 1.5 s) while
  another handle releases it; the time from the release to ``on_lost``.
  Target <= ttl/3 (500 ms) plus one renewal round trip.

Medians and maxima of ``--reps`` repetitions; the figures move with load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rulvar_store import (
    AsyncLeaseKeeper,
    LeaseHeldError,
    LeaseLostError,
    open_store,
    open_store_async,
)

TAKEOVER_TTL_MS = 30_000
LOSS_TTL_MS = 1_500
CHILD = """
import sys, time
from rulvar_store import open_store
with open_store(sys.argv[1], ttl_ms={ttl}) as opened:
    opened.journal.acquire(sys.argv[2], "bench-child")
    print("held", flush=True)
    time.sleep(3600)
"""


def takeover_ms(url: str) -> float:
    run = f"takeover-{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(ttl=TAKEOVER_TTL_MS), url, run],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "held":
            raise RuntimeError("the child did not take the lease")
        with open_store(url, ttl_ms=TAKEOVER_TTL_MS) as opened:
            journal = opened.journal
            journal.load(run)  # the parent's connection is warm, as a worker's is
            os.kill(child.pid, signal.SIGKILL)
            killed = time.perf_counter()
            child.wait()
            while True:
                try:
                    lease = journal.acquire(run, "bench-successor")  # type: ignore[attr-defined]
                    break
                except LeaseHeldError:
                    if time.perf_counter() - killed > TAKEOVER_TTL_MS / 1000 + 5:
                        raise
                    time.sleep(0.002)
            journal.append(run, {"seq": 1, "kind": "resumed"}, lease)
            return (time.perf_counter() - killed) * 1000
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


async def loss_notice_ms(url: str) -> float:
    run = f"loss-{uuid.uuid4().hex[:8]}"
    async with (
        open_store_async(url, ttl_ms=LOSS_TTL_MS) as opened,
        open_store_async(url, ttl_ms=LOSS_TTL_MS) as other,
    ):
        journal = opened.journal
        lease = await journal.acquire(run, "bench-holder")  # type: ignore[attr-defined]
        noticed = asyncio.get_running_loop().create_future()

        def on_lost(error: LeaseLostError) -> None:
            if not noticed.done():
                noticed.set_result(time.perf_counter())

        keeper = AsyncLeaseKeeper.over(journal, lease, on_lost=on_lost)
        await asyncio.sleep(0.1)
        released = time.perf_counter()
        await other.journal.release(lease)  # type: ignore[attr-defined]
        try:
            at: float = await asyncio.wait_for(noticed, LOSS_TTL_MS / 1000 * 3)
        finally:
            await keeper.stop()
        return (at - released) * 1000


def urls(backends: list[str], pg_url: str | None, folder: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in backends:
        if name == "sqlite":
            found[name] = f"sqlite:///{folder / 'takeover.db'}"
        elif name == "postgres":
            base = pg_url or os.environ.get(
                "RULVAR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
            )
            schema = f"bench_takeover_{uuid.uuid4().hex[:8]}"
            found[name] = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    return found


def drop_schema(url: str) -> None:
    if "schema=bench_takeover_" not in url:
        return
    import psycopg

    base, _, query = url.partition("?")
    schema = query.split("schema=")[1].split("&")[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--url", default=None, help="PostgreSQL URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, url in urls(args.backends.split(","), args.url, Path(folder)).items():
            try:
                takeovers = [takeover_ms(url) for _ in range(args.reps)]
                notices = [asyncio.run(loss_notice_ms(url)) for _ in range(args.reps)]
            finally:
                drop_schema(url)
            print(
                f"{name:<9} takeover (SIGKILL -> first acknowledged write): median "
                f"{statistics.median(takeovers):7.1f} ms, max {max(takeovers):7.1f} ms "
                f"(ttl {TAKEOVER_TTL_MS} ms)"
            )
            print(
                f"{name:<9} loss notice (release -> on_lost, asyncio):      median "
                f"{statistics.median(notices):7.1f} ms, max {max(notices):7.1f} ms "
                f"(ttl/3 = {LOSS_TTL_MS // 3} ms)"
            )


if __name__ == "__main__":
    main()
