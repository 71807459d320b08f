"""Child process of test_postgres_pool (P12): real signals at random moments.

``python interrupt_storm.py sync|async URL SCHEMA`` makes store calls on a pool
of 2 while a thread sends this process SIGINT (KeyboardInterrupt) and SIGUSR1
(SystemExit) at random moments, then prints one JSON line: signals sent, calls
interrupted, connections still checked out, and how many of 20 later appends
were stored. Bounded by a count of signals and a time cap.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import threading
import time
from typing import Any

from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

SIGNALS, CAP_S = 400, 60.0


class Storm:
    """A thread sending real signals to this process at random moments (bounded)."""

    def __init__(self, count: int, seed: int) -> None:
        self.count = count
        self.sent = 0
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while self.sent < self.count and not self._stop.is_set():
            self._stop.wait(self._random.uniform(0.0, 0.004))
            kind = signal.SIGINT if self._random.random() < 0.8 else signal.SIGUSR1
            os.kill(os.getpid(), kind)
            self.sent += 1

    def __enter__(self) -> Storm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


class Gate:
    """Signal handlers that raise only while a store call is under way.

    The loop below must survive the storm, so a signal landing outside a call
    is dropped. Inside a call it raises KeyboardInterrupt (SIGINT) or
    SystemExit (SIGUSR1) wherever the main thread is, and disarms itself
    first, so the loop's ``except`` cannot be hit by a second one.
    """

    def __init__(self) -> None:
        self.armed = False
        signal.signal(signal.SIGINT, self.handler)
        signal.signal(signal.SIGUSR1, self.handler)

    def handler(self, signum: int, frame: object) -> None:
        if not self.armed:
            return
        self.armed = False
        if signum == signal.SIGUSR1:
            raise SystemExit("SIGUSR1")
        raise KeyboardInterrupt


def checked_out(pool: Any) -> int:
    stats = pool.get_stats()
    return int(stats.get("pool_size", 0)) - int(stats.get("pool_available", 0))


def storm_sync(url: str, schema: str) -> dict[str, int]:
    gate, interrupted, n = Gate(), 0, 0
    with PostgresStore(url, schema=schema, pool_max_size=2) as store:
        store.get_meta("boot")
        deadline = time.monotonic() + CAP_S
        with Storm(SIGNALS, seed=21) as storm:
            while storm.running and time.monotonic() < deadline:
                n += 1
                try:
                    gate.armed = True
                    if n % 2:
                        store.append("r", {"n": n})
                    else:
                        store.get_meta("r")
                    gate.armed = False
                except (KeyboardInterrupt, SystemExit):
                    interrupted += 1
        gate.armed = False
        out = checked_out(store._pool)
        for seq in range(20):
            store.append("after", {"seq": seq})
        after = len(store.load("after"))
    return {
        "sent": storm.sent,
        "interrupted": interrupted,
        "checked_out": out,
        "after": after,
    }


def settle(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[None]]) -> None:
    """Run the callers the interrupts left suspended to their end.

    A caller whose call was interrupted ends with the interrupt, which leaves
    the loop again (asyncio re-raises KeyboardInterrupt and SystemExit).
    """
    for _ in range(10 * SIGNALS):
        try:
            loop.run_until_complete(asyncio.sleep(0.01))
        except (KeyboardInterrupt, SystemExit):
            continue
        if all(task.done() for task in tasks):
            return
    raise RuntimeError("callers left by the interrupts never finished")


def storm_async(url: str, schema: str) -> dict[str, int]:
    gate, interrupted = Gate(), 0
    loop = asyncio.new_event_loop()
    store = AsyncPostgresStore(url, schema=schema, pool_max_size=2)
    running = [True]
    callers: list[asyncio.Task[None]] = []

    async def calls() -> None:
        n = 0
        while running[0]:
            n += 1
            if n % 2:
                await store.append("r", {"n": n})
            else:
                await store.get_meta("r")

    async def after() -> int:
        for seq in range(20):
            await store.append("after", {"seq": seq})
        return len(await store.load("after"))

    try:
        loop.run_until_complete(store.get_meta("boot"))
        deadline = time.monotonic() + CAP_S
        with Storm(SIGNALS, seed=22) as storm:
            while storm.running and time.monotonic() < deadline:
                try:
                    gate.armed = True
                    callers.append(loop.create_task(calls()))
                    loop.run_until_complete(callers[-1])
                except (KeyboardInterrupt, SystemExit):
                    interrupted += 1
        gate.armed = False
        running[0] = False
        settle(loop, callers)
        out = checked_out(store._pool)
        stored = loop.run_until_complete(after())
    finally:
        loop.run_until_complete(store.aclose())
        loop.close()
    return {
        "sent": storm.sent,
        "interrupted": interrupted,
        "checked_out": out,
        "after": stored,
    }


if __name__ == "__main__":
    kind, url, schema = sys.argv[1:4]
    result = (storm_sync if kind == "sync" else storm_async)(url, schema)
    print(json.dumps({**result, "signals": SIGNALS}))
