"""What telemetry costs a fenced append and a load, beside the same calls without it.

Run: ``python bench/bench_telemetry.py [--reps 7] [--ops 400] [--url sqlite://:memory:]``

Every store method is wrapped by ``rulvar_store``'s telemetry; the wrapped
original stays reachable (``__wrapped__``), so the code as it was before
telemetry runs in the same process, on the same store, in alternating chunks
(load swings hit both alike). Three child processes, one per condition:

- ``no SDK``: the OpenTelemetry API installed, no SDK configured (a library's
  users who never set one up): counters only, one check per call;
- ``SDK``: the SDK configured with in-memory span and metric exporters (every
  call a recorded span, a histogram point and counter adds);
- ``no package``: ``opentelemetry`` made unimportable (the store without the
  ``otel`` extra).

The default store is SQLite in memory (``sqlite://:memory:``): no disk flush
hides the wrapper's microseconds, so the ratios are the worst case; a file URL
(``sqlite:////tmp/x.db``) or a PostgreSQL URL shows them beside real I/O.
Prints per condition the median time per call of each side and the median of
the per-repetition ratios instrumented / bare (targets: no SDK <= 1.03x,
SDK <= 1.15x).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

CONDITIONS = ("no SDK", "SDK", "no package")


def _install_sdk() -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    # The exporter keeps every span; cleared per chunk so memory stays flat.
    _CLEAR.append(exporter.clear)


_CLEAR: list[Callable[[], None]] = []


def _timed(call: Callable[[int], None], ops: int, start: int) -> float:
    began = time.perf_counter()
    for index in range(start, start + ops):
        call(index)
    return (time.perf_counter() - began) / ops


def child(url: str, reps: int, ops: int, condition: str) -> None:
    if condition == "no package":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # unimportable
    elif condition == "SDK":
        _install_sdk()
    from rulvar_store import open_store

    with open_store(url) as opened:
        journal: Any = opened.journal
        kind = type(journal)
        bare_append = kind.append.__wrapped__
        bare_load = kind.load.__wrapped__
        # A run of this child's own: a file URL is shared by the three children.
        run_id = f"bench-{os.getpid()}"
        small = f"small-{os.getpid()}"
        lease = journal.acquire(run_id, "w")
        seq = [0]

        def append(instrumented: bool) -> Callable[[int], None]:
            def one(index: int) -> None:
                seq[0] += 1
                entry = {"seq": seq[0], "kind": "step"}
                if instrumented:
                    journal.append(run_id, entry, lease)
                else:
                    bare_append(journal, run_id, entry, lease)

            return one

        journal.append(small, {"seq": 1}, lease=None)

        def load(instrumented: bool) -> Callable[[int], None]:
            def one(index: int) -> None:
                if instrumented:
                    journal.load(small)
                else:
                    bare_load(journal, small)

            return one

        figures: dict[str, list[float]] = {}
        for name, make in (("append", append), ("load", load)):
            _timed(make(True), ops, 0)  # warm both paths
            _timed(make(False), ops, 0)
            bare: list[float] = []
            wrapped: list[float] = []
            for rep in range(reps):
                order = (False, True) if rep % 2 == 0 else (True, False)
                for instrumented in order:
                    for clear in _CLEAR:
                        clear()
                    took = _timed(make(instrumented), ops, 0)
                    (wrapped if instrumented else bare).append(took)
            figures[name + " bare"] = bare
            figures[name + " instrumented"] = wrapped
        print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--url", default="sqlite://:memory:")
    parser.add_argument("--child", choices=CONDITIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.url, args.reps, args.ops, args.child)
        return
    print(f"{args.url}: {args.reps} repetitions x {args.ops} calls per side")
    print(
        f"{'condition':<12} {'call':<7} {'bare us':>9} {'instr. us':>10} {'ratio':>7}  ratios"
    )
    for condition in CONDITIONS:
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                condition,
                "--url",
                args.url,
                "--reps",
                str(args.reps),
                "--ops",
                str(args.ops),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(done.stdout)
        for call in ("append", "load"):
            bare, wrapped = figures[call + " bare"], figures[call + " instrumented"]
            ratios = sorted(w / b for w, b in zip(wrapped, bare, strict=True))
            print(
                f"{condition:<12} {call:<7} {statistics.median(bare) * 1e6:>9.1f} "
                f"{statistics.median(wrapped) * 1e6:>10.1f} "
                f"{statistics.median(ratios):>6.3f}x  "
                + " ".join(f"{r:.2f}" for r in ratios)
            )


if __name__ == "__main__":
    main()
