"""16 concurrent LangGraph invocations through one async saver, over a slow link.

Run: ``python bench/bench_langgraph_link.py [--delays 0,0.25,0.5] [--reps 3]
[--rounds 4] [--url POSTGRES_URL]`` (needs ``rulvar-stores[bench,langgraph]``; URL
defaults to ``RULVAR_TEST_POSTGRES_URL``, then ``postgresql://postgres@127.0.0.1:5432/test``).

``bench_langgraph.py`` measures the 16 concurrent graphs against a server on
loopback, on the same two cores as the client. There both savers are bound by
the client's CPU (LangGraph's own runtime is about a third of it), so
``AsyncPostgresSaver``'s one lock around its one connection costs little. A
database on another host answers later: then the lock serializes every round
trip of all 16 invocations, while ``AsyncRulvarSaver`` keeps them in flight on
its pool. This script puts the same PostgreSQL server behind a delaying TCP
proxy (``rulvar_conformance.faults.proxy``, in a process of its own so its
threads never take this process's GIL) and measures both savers through it.

``--delays`` are milliseconds added per chunk in each direction, so a round trip
gains about twice that. Per delay and repetition the savers run alternately
(theirs, ours, theirs; ratio against theirs' mean) on fresh schemas; the summary
prints invocations/s, client CPU per invocation and the ratio per repetition
with the median. The proxy pays the same for both savers' bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.bench_langgraph import CPU_MS, PostgresSide, concurrent_graphs
from bench.peer_savers import require_langgraph_savers
from rulvar_langgraph import AsyncRulvarSaver

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"

# The proxy's process: forward to the server, delay each chunk, print the port,
# and stop when this process closes its stdin (or dies).
_PROXY = """
import sys
from rulvar_conformance.faults.proxy import FaultProxy
proxy = FaultProxy(1, sys.argv[1], int(sys.argv[2]))
proxy.degrade(0, float(sys.argv[3]), 0.0)
print(proxy.port_of(0), flush=True)
sys.stdin.read()
proxy.close()
"""


@contextmanager
def proxied(url: str, delay_ms: float) -> Iterator[str]:
    """``url`` rewritten to reach its server through a delaying proxy process."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    proxy = subprocess.Popen(
        [sys.executable, "-c", _PROXY, host, str(port), str(delay_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        local = int(proxy.stdout.readline())
        user, at, _ = parts.netloc.rpartition("@")
        yield parts._replace(netloc=f"{user}{at}127.0.0.1:{local}").geturl()
    finally:
        assert proxy.stdin is not None
        proxy.stdin.close()
        proxy.wait(timeout=30)


async def one_rep(url: str, rounds: int) -> dict[str, float]:
    """Theirs, ours, theirs over ``url``: invocations/s and CPU ms per invocation."""
    side = PostgresSide(url)
    try:
        async with AsyncExitStack() as stack:
            theirs = await side.theirs_async(stack)
            ours = await stack.enter_async_context(
                AsyncRulvarSaver.from_url(side.ours_url, owner="bench")
            )
            await concurrent_graphs(theirs, 1, held=False)  # connect, warm up
            await concurrent_graphs(ours, 1, held=True)
            CPU_MS.clear()
            theirs_a = await concurrent_graphs(theirs, rounds, held=False)
            ours_rate = await concurrent_graphs(ours, rounds, held=True)
            theirs_b = await concurrent_graphs(theirs, rounds, held=False)
    finally:
        side.drop()
    theirs_rate = (theirs_a + theirs_b) / 2
    return {
        "ours": ours_rate,
        "theirs": theirs_rate,
        "ratio": ours_rate / theirs_rate,
        "ours_cpu": CPU_MS[1],
        "theirs_cpu": (CPU_MS[0] + CPU_MS[2]) / 2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("RULVAR_TEST_POSTGRES_URL") or DEFAULT_URL
    )
    parser.add_argument("--delays", default="0,0.25,0.5", help="ms per chunk, each way")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--rounds", type=int, default=4, help="rounds of 16 invocations"
    )
    args = parser.parse_args()
    require_langgraph_savers()
    delays = [float(d) for d in args.delays.split(",")]
    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.reps} reps x {args.rounds} rounds"
    )
    for delay in delays:
        reps = []
        with proxied(args.url, delay) as url:
            for _ in range(args.reps):
                reps.append(asyncio.run(one_rep(url, args.rounds)))
        ratios = [rep["ratio"] for rep in reps]
        print(
            f"delay {delay:g} ms/chunk each way: ours / AsyncPostgresSaver "
            f"{statistics.median(ratios):.2f}x "
            f"[{', '.join(f'{r:.2f}' for r in ratios)}]; invocations/s ours "
            f"{statistics.median(r['ours'] for r in reps):.0f}, theirs "
            f"{statistics.median(r['theirs'] for r in reps):.0f}; client CPU ms per "
            f"invocation ours {statistics.median(r['ours_cpu'] for r in reps):.2f}, "
            f"theirs {statistics.median(r['theirs_cpu'] for r in reps):.2f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
