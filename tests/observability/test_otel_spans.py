"""Spans and metrics through the OpenTelemetry SDK's in-memory exporters, per backend.

Each case runs ``otel_probe.py`` in a child process (the SDK's providers can be
set once per process) and reads what its exporters caught: a CLIENT span per
store call under the caller's span, named and attributed by the database
semantic conventions, the refusal of a stale write as an error with the fence's
verdict, the duration histogram and the counters, and not one byte of the
URL's password anywhere.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests._postgres_gate import postgres_url

PROBE = Path(__file__).with_name("otel_probe.py")
PASSWORD = "s3cr3t-Pw-" + "x9"
"""Sent in the PostgreSQL URL; the local server trusts loopback, so it connects."""


def probe(url: str, mode: str, *extra: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "OTEL_SDK_DISABLED"}
    done = subprocess.run(
        [sys.executable, str(PROBE), url, mode, *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture
def postgres_schema_url() -> Iterator[str]:
    base = postgres_url()
    schema = f"rulvar_otel_{secrets.token_hex(5)}"
    with_password = re.sub(
        r"^postgresql://([^@:/]+)@", rf"postgresql://\1:{PASSWORD}@", base
    )
    yield f"{with_password}?schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "file", "sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    name = request.param
    if name == "memory":
        return name, "memory://"
    if name == "file":
        return name, f"file://{tmp_path}"
    if name == "sqlite":
        return name, f"sqlite:///{tmp_path}/runs.db"
    return name, request.getfixturevalue("postgres_schema_url")


SYSTEMS = {
    "memory": "rulvar.memory",
    "file": "rulvar.file",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
}


def _store_spans(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in found["spans"] if span["name"] != "app"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_span_per_store_call_under_the_callers_span(
    backend: tuple[str, str], mode: str
) -> None:
    name, url = backend
    found = probe(url, mode)
    spans = _store_spans(found)
    names = {span["name"] for span in spans}
    assert {"append journal", "put blobs", "load journal"} <= names
    if name != "file":
        assert {"acquire journal", "release journal"} <= names
    for span in spans:
        attributes = span["attributes"]
        assert span["kind"] == "CLIENT"
        assert span["parent"] == found["app"], span["name"]
        assert attributes["db.system.name"] == SYSTEMS[name]
        assert span["name"].startswith(attributes["db.operation.name"] + " ")
        assert len(attributes["rulvar.run.id"]) == 16  # hashed by default
        if name == "postgresql":
            assert attributes["server.address"] == "127.0.0.1"
            assert attributes["server.port"] == 5432
            assert re.fullmatch(
                r"test\|rulvar_otel_[0-9a-f]{10}", attributes["db.namespace"]
            )
        elif name != "memory":
            assert attributes["db.namespace"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_refused_stale_write_is_an_error_span_with_the_fences_verdict(
    backend: tuple[str, str], mode: str
) -> None:
    name, url = backend
    if name == "file":
        pytest.skip("the file store has no leases, so no write is stale (T8)")
    found = probe(url, mode)
    appends = [s for s in _store_spans(found) if s["name"] == "append journal"]
    verdicts = sorted(s["attributes"]["rulvar.fence.outcome"] for s in appends)
    assert verdicts == ["accepted", "refused"]
    refused = next(s for s in appends if s["status"] == "ERROR")
    assert refused["attributes"]["error.type"] == "rulvar_store.errors.LeaseHeldError"
    assert refused["description"] == "LeaseHeldError"
    metrics = found["metrics"]
    assert any(
        point["attributes"].get("rulvar.fence.surface") == "journal"
        for point in metrics["rulvar.store.stale_writes_refused"]
    )
    assert found["stats"]["stale_writes_refused_by_surface"]["journal"] == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_call_lands_in_the_duration_histogram(
    backend: tuple[str, str], mode: str
) -> None:
    name, url = backend
    found = probe(url, mode)
    points = found["metrics"]["db.client.operation.duration"]
    operations = {point["attributes"]["db.operation.name"] for point in points}
    assert {"append", "put", "load"} <= operations
    for point in points:
        assert point["attributes"]["db.system.name"] == SYSTEMS[name]
        assert point["value"]["count"] >= 1
    failed = [p for p in points if "error.type" in p["attributes"]]
    assert bool(failed) == (name != "file")


def test_sqlite_reports_group_commit_sizes(tmp_path: Path) -> None:
    found = probe(f"sqlite:///{tmp_path}/runs.db", "sync")
    sizes = found["metrics"]["rulvar.store.group_commit.size"]
    assert sum(point["value"]["count"] for point in sizes) >= 4


def test_postgres_reports_its_pool(postgres_schema_url: str) -> None:
    found = probe(postgres_schema_url, "sync")
    # Observable instruments are read at collection, after the store closed: a
    # closed pool still reports its figures (size 0 or the last ones).
    assert "db.client.connection.count" in found["metrics"]
    assert found["stats"]["pool"]["pool_max"] >= 1


@pytest.mark.parametrize(
    ("policy", "shown"),
    [
        ("hash", re.compile(r"[0-9a-f]{16}")),
        ("plain", re.compile("run-1")),
        ("omit", None),
    ],
)
def test_the_run_id_is_hashed_shown_or_omitted_as_configured(
    policy: str, shown: re.Pattern[str] | None
) -> None:
    found = probe("memory://", "sync", policy)
    for span in _store_spans(found):
        value = span["attributes"].get("rulvar.run.id")
        if shown is None:
            assert value is None
        else:
            assert value is not None
            assert shown.fullmatch(value)


@pytest.mark.parametrize("backend_url", ["memory://", "sqlite"])
def test_saver_calls_are_spans_with_their_store_calls_inside(
    backend_url: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/lg.db" if backend_url == "sqlite" else backend_url
    found = probe(url, "saver")
    spans = found["spans"]
    by_id = {span["id"]: span for span in spans}
    puts = [span for span in spans if span["name"] == "put checkpoint"]
    assert puts
    assert all(span["parent"] == found["app"] for span in puts)
    nested = [
        span
        for span in spans
        if span["name"] == "put blobs"
        and by_id.get(span["parent"], {}).get("name") == "put checkpoint"
    ]
    assert nested, "the store's put nests under the saver's"
    assert all(len(span["attributes"]["rulvar.run.id"]) == 16 for span in puts)
    metrics = found["metrics"]
    checkpoints = metrics["rulvar.langgraph.checkpoints"]
    assert sum(point["value"] for point in checkpoints) == len(puts)
    assert found["stats"]["checkpoints"] == len(puts)
    assert found["stats"]["writes"] > 0
    assert found["stats"]["writes"] == sum(
        point["value"] for point in metrics["rulvar.langgraph.writes"]
    )
    # The saver's calls are counted apart from its store's.
    saver_calls = sum(point["value"] for point in metrics["rulvar.langgraph.calls"])
    store_calls = sum(point["value"] for point in metrics["rulvar.store.calls"])
    assert 0 < saver_calls < store_calls
