"""What telemetry costs a fenced append and a load, beside the same calls without it.

Run: ``python bench/bench_telemetry.py [--reps 9] [--ops 400] [--url sqlite://:memory:]``

Every instrumented store method keeps the function as written under
``__wrapped__``, so the code as it was before telemetry runs in the same
process, on the same store, in alternating chunks (load swings hit both
alike; each repetition runs the two sides back to back, in alternating order,
and its ratio is instrumented / bare). Three child processes, one per
condition:

- ``no SDK``: the OpenTelemetry API installed, no SDK configured (a library's
  users who never set one up): the counting wrappers;
- ``SDK``: the SDK configured with in-memory span and metric exporters (every
  call a recorded span and a histogram point). A third side runs in the same
  repetitions: ``hand-made``, the unwrapped call inside the least any
  instrumentation must do (a span with the same attributes, made current
  while the call runs, and one duration point, all built beforehand): the
  SDK's own cost, the floor under that condition's ratio;
- ``no package``: ``opentelemetry`` made unimportable (the store without the
  ``otel`` extra).

Each append chunk writes a fresh run (its lease taken outside the timing), so
a store whose append grows with the journal (memory) is timed alike on both
sides. The default store is SQLite in memory: no disk flush hides the
wrapper's cost, so the ratios are the worst case; a file URL
(``sqlite:////tmp/x.db``, ``synchronous=FULL`` by default) or a PostgreSQL URL
(a fresh schema is made and dropped) shows them beside real I/O. Prints per
condition the median time per call of each side and the median of the
per-repetition ratios (targets: no SDK <= 1.03x, SDK <= 1.15x).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

CONDITIONS = ("no SDK", "SDK", "no package")
TARGETS = {"no SDK": 1.03, "SDK": 1.15, "no package": 1.03}


def _install_sdk() -> Callable[[], None]:
    """Configure the SDK with in-memory exporters; return what clears them."""
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
    # The exporter keeps every span: cleared per chunk so memory stays flat.
    return exporter.clear


def _hand_made(journal: Any, operation: str) -> Callable[[Callable[[], Any]], Any]:
    """The least any instrumentation must do around one call under the SDK: a
    span with the attributes this package sets, made current while the call
    runs, and one duration point (all built once, here)."""
    from opentelemetry import context, metrics, trace
    from opentelemetry.trace import SpanKind

    from rulvar_store.backend import telemetry_target

    target = telemetry_target(journal)
    metric: dict[str, Any] = {"db.operation.name": operation}
    if target is not None:
        metric["db.system.name"] = target.system
        for key, value in (
            ("db.namespace", target.namespace),
            ("server.address", target.address),
            ("server.port", target.port),
        ):
            if value is not None:
                metric[key] = value
    span_attributes = {**metric, "rulvar.run.id": "0123456789abcdef"}
    if operation == "append":
        span_attributes |= {"rulvar.lease.epoch": 1, "rulvar.fence.outcome": "accepted"}
    tracer = trace.get_tracer("bench")
    histogram = metrics.get_meter("bench").create_histogram("bench.duration", unit="s")
    name = f"{operation} journal"
    client = SpanKind.CLIENT

    def around(call: Callable[[], Any]) -> Any:
        span = tracer.start_span(name, kind=client, attributes=span_attributes)
        token = context.attach(trace.set_span_in_context(span))
        began = time.perf_counter_ns()
        try:
            return call()
        finally:
            histogram.record((time.perf_counter_ns() - began) / 1e9, metric)
            context.detach(token)
            span.end()

    return around


SIDES = ("bare", "instrumented", "hand-made")


def child(url: str, reps: int, ops: int, condition: str) -> None:
    clear: Callable[[], None] = lambda: None  # noqa: E731  # nothing to clear
    if condition == "no package":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # unimportable
    elif condition == "SDK":
        clear = _install_sdk()
    from rulvar_store import open_store

    with open_store(url) as opened:
        journal: Any = opened.journal
        kind = type(journal)
        bare_append = kind.append.__wrapped__
        bare_load = kind.load.__wrapped__
        # Runs of this child's own: a file URL is shared by the three children.
        prefix = f"bench-{os.getpid()}"
        chunks = itertools.count()
        small = f"{prefix}-small"
        journal.append(small, {"seq": 1}, None)
        hand_made = condition == "SDK"
        around_append = _hand_made(journal, "append") if hand_made else None
        around_load = _hand_made(journal, "load") if hand_made else None

        def append(side: str) -> float:
            run_id = f"{prefix}-{next(chunks)}"
            lease = journal.acquire(run_id, "w")
            entries = [{"seq": seq, "kind": "step"} for seq in range(1, ops + 1)]
            began = time.perf_counter_ns()
            if side == "instrumented":
                for entry in entries:
                    journal.append(run_id, entry, lease)
            elif side == "bare":
                for entry in entries:
                    bare_append(journal, run_id, entry, lease)
            else:
                assert around_append is not None
                for entry in entries:
                    around_append(partial(bare_append, journal, run_id, entry, lease))
            return (time.perf_counter_ns() - began) / ops / 1e9

        def load(side: str) -> float:
            began = time.perf_counter_ns()
            if side == "instrumented":
                for _ in range(ops):
                    journal.load(small)
            elif side == "bare":
                for _ in range(ops):
                    bare_load(journal, small)
            else:
                assert around_load is not None
                for _ in range(ops):
                    around_load(partial(bare_load, journal, small))
            return (time.perf_counter_ns() - began) / ops / 1e9

        sides = SIDES if hand_made else SIDES[:2]
        figures: dict[str, list[float]] = {}
        for name, run in (("append", append), ("load", load)):
            for side in sides:  # warm every path
                run(side)
            for rep in range(reps):
                for side in sides if rep % 2 == 0 else sides[::-1]:
                    clear()
                    figures.setdefault(f"{name} {side}", []).append(run(side))
        print(json.dumps(figures))


def _schema_url(url: str) -> tuple[str, str | None]:
    """A PostgreSQL URL without a schema gets a fresh one (dropped afterwards)."""
    if not url.startswith(("postgresql://", "postgres://")) or "schema=" in url:
        return url, None
    schema = f"rulvar_bench_tel_{secrets.token_hex(4)}"
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}schema={schema}", schema


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--url", default="sqlite://:memory:")
    parser.add_argument("--child", choices=CONDITIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.url, args.reps, args.ops, args.child)
        return
    url, schema = _schema_url(args.url)
    print(f"{args.url}: {args.reps} repetitions x {args.ops} calls per side")
    print(
        f"{'condition':<12} {'call':<7} {'bare us':>9} {'instr. us':>10} "
        f"{'ratio':>7} {'target':>7}  ratios"
    )
    try:
        for condition in CONDITIONS:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    condition,
                    "--url",
                    url,
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
                ratio = statistics.median(ratios)
                verdict = "met" if ratio <= TARGETS[condition] else "missed"
                print(
                    f"{condition:<12} {call:<7} {statistics.median(bare) * 1e6:>9.1f} "
                    f"{statistics.median(wrapped) * 1e6:>10.1f} {ratio:>6.3f}x "
                    f"{verdict:>7}  " + " ".join(f"{r:.2f}" for r in ratios)
                )
                made = figures.get(call + " hand-made")
                if made is not None:
                    # The same call in a hand-made span and duration point: the
                    # SDK's own cost, which no instrumentation comes in under.
                    floors = sorted(m / b for m, b in zip(made, bare, strict=True))
                    print(
                        f"{'  hand-made':<12} {call:<7} {'':>9} "
                        f"{statistics.median(made) * 1e6:>10.1f} "
                        f"{statistics.median(floors):>6.3f}x {'floor':>7}  "
                        + " ".join(f"{r:.2f}" for r in floors)
                    )
    finally:
        if schema is not None:
            _drop_schema(url, schema)


if __name__ == "__main__":
    main()
