"""``stats()``: the counters every built-in store keeps without OpenTelemetry.

The same keys on every backend, sync and async; each counter moves when what it
names happens, and only then. A process without the OpenTelemetry package uses
every store without importing it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import (
    Lease,
    LeaseHeldError,
    MemoryStore,
    StoreBusyError,
    open_store,
    open_store_async,
)
from rulvar_store.ops import COUNTER_NAMES
from rulvar_store_sqlite import SqliteStore
from tests._postgres_gate import postgres_url


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _url_of(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    if backend == "memory":
        yield "memory://"
    elif backend == "sqlite":
        yield f"sqlite:///{tmp_path}/runs.db"
    else:
        import psycopg

        base = postgres_url()
        schema = f"rulvar_stats_{os.getpid()}_{id(request)}"
        yield f"{base}?schema={schema}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def leasable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _url_of(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def fused_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store with the fused calls (a brief lease in one transaction, ...)."""
    yield from _url_of(request.param, request, tmp_path)


def test_every_store_reports_the_same_counters(
    leasable_url: str, tmp_path: Path
) -> None:
    with open_store(leasable_url) as opened:
        figures = opened.journal.stats()  # type: ignore[attr-defined]  # built-in stores
    assert set(COUNTER_NAMES) <= set(figures)
    assert figures["calls"] == 0
    with open_store(f"file://{tmp_path}/files") as opened:
        assert set(COUNTER_NAMES) <= set(opened.journal.stats())  # type: ignore[attr-defined]  # built-in stores


def test_counters_follow_leases_refusals_and_releases(leasable_url: str) -> None:
    with open_store(leasable_url) as opened:
        journal, blobs = opened.journal, opened.transcripts
        lease = journal.acquire("run-1", "a")  # type: ignore[attr-defined]  # leasable
        journal.append("run-1", {"seq": 1}, lease)
        blobs.put("run-1/x", b"1", lease)
        stale = Lease("run-1", "a", lease.epoch + 7)
        for refused in (
            lambda: journal.append("run-1", {"seq": 2}, stale),
            lambda: journal.put_meta({"runId": "run-1", "status": "running"}, stale),
            lambda: blobs.put("run-1/x", b"2", stale),
            lambda: blobs.delete("run-1/x", stale),
            lambda: journal.renew(stale),  # type: ignore[attr-defined]  # leasable
        ):
            with pytest.raises(LeaseHeldError):
                refused()
        journal.release(lease)  # type: ignore[attr-defined]  # leasable
        figures = journal.stats()  # type: ignore[attr-defined]  # built-in stores
    assert figures["leases_acquired"] == 1
    assert figures["leases_released"] == 1
    assert figures["leases_lost"] == 1  # the refused renew
    assert figures["stale_writes_refused"] == 5
    assert figures["stale_writes_refused_by_surface"] == {
        "journal": 1,
        "meta": 1,
        "blob": 1,
        "blob-delete": 1,
        "lease": 1,
    }
    assert figures["errors"] == 5
    assert figures["calls"] == 9  # the twin's calls count as the journal's
    if leasable_url.startswith("postgresql"):
        assert figures["leases_taken_over"] is None  # not told by the server function
    else:
        assert figures["leases_taken_over"] == 0


def test_fused_calls_count_their_leases_and_refusals(fused_url: str) -> None:
    """A brief lease in one transaction counts a lease taken and given back; a
    fused write refused for a stale lease counts under its surface."""
    with open_store(fused_url) as opened:
        journal: Any = opened.journal
        meta = {"runId": "run-1", "status": "running"}

        def work(lease: Lease, inside: Any, blobs: Any) -> int:
            blobs.put("run-1/x", b"1", lease)
            return lease.epoch

        epoch = journal.in_brief_lease("run-1", "a", work)
        lease = journal.acquire("run-1", "b")
        journal.put_with_meta("run-1/y", b"2", meta, lease)
        journal.put_meta_and_release(meta, lease)  # releases it
        with pytest.raises(LeaseHeldError):
            journal.put_with_meta("run-1/z", b"3", meta, lease)
        with pytest.raises(LeaseHeldError):
            journal.put_meta_and_release(meta, lease)
        figures = journal.stats()
    assert lease.epoch == epoch + 1
    assert figures["leases_acquired"] == 2
    assert figures["leases_released"] == 2
    assert figures["stale_writes_refused_by_surface"] == {"blob": 1, "meta": 1}
    assert figures["calls"] == 6


def test_a_takeover_of_an_expired_lease_is_counted() -> None:
    clock = Clock()
    store = MemoryStore(ttl_ms=1_000, now=clock)
    store.acquire("run-1", "a")
    store.acquire("run-2", "a")
    store.release(store.acquire("run-3", "a"))
    clock.ms += 1_001
    store.acquire("run-1", "b")  # expired: taken over
    store.acquire("run-3", "b")  # released: not a takeover
    assert store.stats()["leases_taken_over"] == 1
    assert store.stats()["leases_acquired"] == 5


def test_sqlite_counts_takeovers_batches_and_busy_timeouts(tmp_path: Path) -> None:
    clock = Clock()
    path = str(tmp_path / "runs.db")
    store = SqliteStore(path, ttl_ms=1_000, now=clock, busy_timeout_ms=50)
    other = SqliteStore(path, ttl_ms=1_000, now=clock)
    try:
        store.acquire("run-1", "a")
        clock.ms += 1_001
        store.acquire("run-1", "b")
        with other._door.lock:  # white-box: hold the write lock from the other handle
            other._cursor.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreBusyError):
                    store.append("run-1", {"seq": 1})
            finally:
                other._cursor.execute("ROLLBACK")
        figures = store.stats()
    finally:
        store.close()
        other.close()
    assert figures["leases_taken_over"] == 1
    assert figures["busy_timeouts"] == 1
    assert figures["busy_retries"] >= 1
    assert figures["group_commit_batches"] >= 2
    assert figures["group_commit_operations"] >= figures["group_commit_batches"]


def test_async_stores_report_their_sync_stores_counters(tmp_path: Path) -> None:
    async def run(url: str) -> dict[str, object]:
        async with open_store_async(url) as opened:
            journal: Any = opened.journal
            lease = await journal.acquire("run-1", "a")
            await journal.append("run-1", {"seq": 1}, lease)
            await journal.load("run-1")
            await opened.transcripts.put("run-1/x", b"1", lease)
            figures: dict[str, object] = journal.stats()
            return figures

    for url in ("memory://", f"sqlite:///{tmp_path}/runs.db"):
        figures = asyncio.run(run(url))
        assert figures["calls"] == 4, url  # each call once, not per layer
        assert figures["leases_acquired"] == 1


def test_a_process_without_opentelemetry_never_imports_it(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if the package were not installed
        from rulvar_store import open_store
        with open_store("sqlite:///{tmp_path}/runs.db") as opened:
            lease = opened.journal.acquire("r", "a")
            opened.journal.append("r", {{"seq": 1}}, lease)
            figures = opened.journal.stats()
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry."))
        assert loaded == [], loaded
        assert figures["calls"] == 2, figures
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_rulvar_check_json_reports_what_its_stores_counted() -> None:
    """The fenced-writes suite refuses stale writes on purpose: the JSON says so."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "check",
            "memory://",
            "--suite",
            "fenced-writes",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)["store_stats"]
    assert figures["calls"] > 0
    assert figures["stale_writes_refused"] == sum(
        figures["stale_writes_refused_by_surface"].values()
    )
    assert figures["stale_writes_refused"] > 0
