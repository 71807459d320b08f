"""Call every SPI method of a store once and report what each moved; print JSON.

A child process of the telemetry tests (an SDK's providers can be set once per
process). Usage: ``python count_probe.py URL sync|async none|sdk|late``:

- ``none``: the OpenTelemetry API importable, no SDK configured;
- ``sdk``: the SDK's in-memory exporters configured before the store opens;
- ``late``: configured after the store opened and served its first calls.

Reports, per call, how much the process's store calls (``process_stats()``)
moved and how many spans the exporter caught for it; ``warm-up spans``: those
of the first call, made before a late SDK existed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rulvar_store import Lease, open_store, open_store_async
from rulvar_store.ops import process_stats

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()


def install_sdk() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


def calls(
    journal: Any, blobs: Any, leasable: bool, is_async: bool
) -> list[tuple[str, Any]]:
    """``(name, thunk)`` per SPI call, in an order that leaves every one valid."""
    held: dict[str, Lease | None] = {"lease": None}

    def acquire() -> Any:
        held["lease"] = journal.acquire("run-1", "worker-a")
        return held["lease"]

    async def acquire_async() -> Any:
        held["lease"] = await journal.acquire("run-1", "worker-a")
        return held["lease"]

    steps: list[tuple[str, Any]] = []
    if leasable:
        steps.append(("acquire", acquire_async if is_async else acquire))
        steps.append(("renew", lambda: journal.renew(held["lease"])))
        steps.append(("peek_lease", lambda: journal.peek_lease("run-1")))
    steps += [
        ("append", lambda: journal.append("run-1", {"seq": 1}, held["lease"])),
        ("load", lambda: journal.load("run-1")),
        ("load_since", lambda: journal.load_since("run-1", None)),
        (
            "put_meta",
            lambda: journal.put_meta(
                {"runId": "run-1", "status": "running"}, held["lease"]
            ),
        ),
        ("get_meta", lambda: journal.get_meta("run-1")),
        ("list_runs", lambda: journal.list_runs()),
        ("put", lambda: blobs.put("run-1/a/1", b"x", held["lease"])),
        (
            "put_many",
            lambda: blobs.put_many(
                [("run-1/a/2", b"y"), ("run-1/a/3", b"z")], held["lease"]
            ),
        ),
        ("get", lambda: blobs.get("run-1/a/1")),
        ("list_refs", lambda: blobs.list_refs("run-1")),
        ("last_ref", lambda: blobs.last_ref("run-1", "run-1/a/")),
        ("get_under", lambda: blobs.get_under("run-1", "run-1/a/")),
        ("blob delete", lambda: blobs.delete("run-1/a/3", held["lease"])),
    ]
    if leasable:
        steps.append(("release", lambda: journal.release(held["lease"])))
    steps.append(("delete", lambda: journal.delete("run-1")))
    return [(name, step) for name, step in steps if _offered(journal, blobs, name)]


def _offered(journal: Any, blobs: Any, name: str) -> bool:
    owner, method = (blobs, "delete") if name == "blob delete" else (None, name)
    if owner is None:
        owner = blobs if name in _BLOB_CALLS else journal
    return callable(getattr(owner, method, None))


_BLOB_CALLS = {"put", "put_many", "get", "list_refs", "last_ref", "get_under"}


def _seen() -> tuple[int, int]:
    """Calls counted by every store of the process, spans exported."""
    return process_stats()["calls"], len(EXPORTER.get_finished_spans())


def _moved(before: tuple[int, int]) -> dict[str, int]:
    after = _seen()
    return {"calls": after[0] - before[0], "spans": after[1] - before[1]}


def sync_run(url: str, late: bool) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with open_store(url) as opened:
        journal: Any = opened.journal
        blobs: Any = opened.transcripts
        leasable = callable(getattr(journal, "acquire", None))
        journal.load("warm-up")
        if late:
            install_sdk()
        report["warm-up spans"] = len(EXPORTER.get_finished_spans())
        for name, step in calls(journal, blobs, leasable, is_async=False):
            before = _seen()
            step()
            report[name] = _moved(before)
    return report


async def async_run(url: str, late: bool) -> dict[str, Any]:
    report: dict[str, Any] = {}
    async with open_store_async(url) as opened:
        journal: Any = opened.journal
        blobs: Any = opened.transcripts
        leasable = callable(getattr(journal, "acquire", None))
        await journal.load("warm-up")
        if late:
            install_sdk()
        report["warm-up spans"] = len(EXPORTER.get_finished_spans())
        for name, step in calls(journal, blobs, leasable, is_async=True):
            before = _seen()
            awaited: Callable[[], Awaitable[Any]] = step
            await awaited()
            report[name] = _moved(before)
    return report


def main() -> None:
    url, mode, sdk = sys.argv[1], sys.argv[2], sys.argv[3]
    if sdk == "sdk":
        install_sdk()
    late = sdk == "late"
    report = (
        asyncio.run(async_run(url, late)) if mode == "async" else sync_run(url, late)
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
