"""Run a store scenario under the OpenTelemetry SDK's in-memory exporters; print JSON.

A child process of the telemetry tests: the SDK's providers can be set once per
process, and a provider set in the test process would trace every later test.
Usage: ``python otel_probe.py URL sync|async|saver [run_ids]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any, TypedDict, cast

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rulvar_store import Lease, LeaseHeldError, open_store, open_store_async
from rulvar_store.ops import RunIdPolicy, configure_telemetry

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()


def install_sdk() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


def sync_scenario(url: str) -> dict[str, Any]:
    with open_store(url) as opened:
        journal: Any = opened.journal
        blobs: Any = opened.transcripts
        leasable = callable(getattr(journal, "acquire", None))
        lease = journal.acquire("run-1", "worker-a") if leasable else None
        journal.append("run-1", {"seq": 1, "kind": "step"}, lease)
        blobs.put("run-1/turn", b"checkpoint", lease)
        if lease is not None:
            stale = Lease("run-1", "worker-a", lease.epoch - 1)
            with contextlib.suppress(LeaseHeldError):
                journal.append("run-1", {"seq": 2}, stale)
            with contextlib.suppress(LeaseHeldError):
                blobs.put("run-1/turn", b"late", stale)
        journal.load("run-1")
        if lease is not None:
            journal.release(lease)
        figures: dict[str, Any] = journal.stats()
        return figures


async def async_scenario(url: str) -> dict[str, Any]:
    async with open_store_async(url) as opened:
        journal: Any = opened.journal
        blobs: Any = opened.transcripts
        leasable = callable(getattr(journal, "acquire", None))
        lease = await journal.acquire("run-1", "worker-a") if leasable else None
        await journal.append("run-1", {"seq": 1, "kind": "step"}, lease)
        await blobs.put("run-1/turn", b"checkpoint", lease)
        if lease is not None:
            stale = Lease("run-1", "worker-a", lease.epoch - 1)
            with contextlib.suppress(LeaseHeldError):
                await journal.append("run-1", {"seq": 2}, stale)
        await journal.load("run-1")
        if lease is not None:
            await journal.release(lease)
        stats = getattr(journal, "stats", None)
        return {} if stats is None else stats()


class State(TypedDict):
    n: int


def saver_scenario(url: str) -> dict[str, Any]:
    from langgraph.graph import END, START, StateGraph

    from rulvar_langgraph import RulvarSaver

    def step(state: State) -> State:
        return {"n": state["n"] + 1}

    graph = StateGraph(State)
    graph.add_node("a", step)
    graph.add_node("b", step)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    with RulvarSaver.from_url(url, owner="worker-a") as saver:
        app = graph.compile(checkpointer=saver)
        with saver.hold("thread-1") as config:
            app.invoke({"n": 0}, config)
        return saver.stats()


def _points(metric: Any) -> list[dict[str, Any]]:
    points = []
    for point in metric.data.data_points:
        value = getattr(point, "value", None)
        if value is None:
            value = {"count": point.count, "sum": point.sum}
        points.append({"attributes": dict(point.attributes), "value": value})
    return points


def main() -> None:
    url, mode = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        configure_telemetry(run_ids=cast(RunIdPolicy, sys.argv[3]))
    install_sdk()
    tracer = trace.get_tracer("probe")
    with tracer.start_as_current_span("app") as app:
        app_id = app.get_span_context().span_id
        if mode == "sync":
            stats = sync_scenario(url)
        elif mode == "async":
            stats = asyncio.run(async_scenario(url))
        else:
            stats = saver_scenario(url)
    spans = [
        {
            "name": span.name,
            "kind": span.kind.name,
            "parent": None if span.parent is None else span.parent.span_id,
            "id": span.context.span_id,
            "attributes": dict(span.attributes or {}),
            "status": span.status.status_code.name,
            "description": span.status.description,
        }
        for span in EXPORTER.get_finished_spans()
    ]
    found: dict[str, list[dict[str, Any]]] = {}
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = _points(metric)
    print(
        json.dumps(
            {"app": app_id, "spans": spans, "metrics": found, "stats": stats},
            default=str,
        )
    )


if __name__ == "__main__":
    main()
