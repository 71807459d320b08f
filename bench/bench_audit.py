"""``rulvar runs audit`` over many runs: time and memory, beside the raw driver.

Run: ``python bench/bench_audit.py [--runs 10000] [--postgres URL]``

Seeds N runs (5 journal entries each, one in ten with its meta behind the
journal) straight through the driver in one transaction, then measures, on the
same store in the same run:

- the audit pass: ``iter_run_audits`` over a read-only store (what ``rulvar runs
  audit`` runs), wall seconds and runs per second;
- the raw driver doing the least an audit must do: one keyset page of metas at a
  time plus one ``SELECT payload`` + ``json.loads`` per run, as the ratio
  audit / raw;
- peak Python heap (tracemalloc) of the audit at N/10 and at N runs: a pass that
  held every run would grow tenfold, a streaming one stays flat;
- the real command as a child process: wall seconds and its max RSS.

Nothing is asserted; figures move between runs of a busy machine, the ratio and
the flat heap are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rulvar_store import open_store
from rulvar_store.ops import iter_run_audits

ROOT = Path(__file__).resolve().parents[1]


def journal(run: int) -> list[dict[str, Any]]:
    settle = {"decisionType": "run_settle", "runStatus": "ok", "segment": 1}
    return [
        {
            "hashVersion": 2,
            "seq": 0,
            "scope": "",
            "kind": "agent",
            "status": "running",
            "key": f"k{run}",
        },
        {
            "hashVersion": 2,
            "seq": 1,
            "scope": "",
            "kind": "agent",
            "status": "ok",
            "ref": 0,
            "value": {"text": "x" * 200},
        },
        {
            "hashVersion": 2,
            "seq": 2,
            "scope": "",
            "kind": "external",
            "status": "suspended",
            "value": {"key": "gate"},
        },
        {
            "hashVersion": 2,
            "seq": 3,
            "scope": "",
            "kind": "resolution",
            "status": "ok",
            "ref": 2,
            "resolution": {"target": 2, "by": "external", "value": 1},
        },
        {
            "hashVersion": 2,
            "seq": 4,
            "scope": "",
            "kind": "decision",
            "status": "ok",
            "value": settle,
        },
    ]


def rows(count: int) -> Iterator[tuple[str, list[str], str]]:
    for run in range(count):
        run_id = f"run-{run:06d}"
        status = "running" if run % 10 == 0 else "ok"  # one in ten: meta-behind
        meta = {
            "runId": run_id,
            "status": status,
            "updatedAt": "2026-01-01T00:00:00.000Z",
            "name": "bench",
        }
        yield (
            run_id,
            [json.dumps(e, separators=(",", ":")) for e in journal(run)],
            json.dumps(meta),
        )


def seed_sqlite(path: str, count: int) -> None:
    import apsw

    open_store(f"sqlite:///{path}").close()  # the store's own bootstrap
    conn = apsw.Connection(path)
    with conn:
        for run_id, entries, meta in rows(count):
            conn.executemany(
                "INSERT INTO entries (run_id, payload) VALUES (?, ?)",
                [(run_id, text) for text in entries],
            )
            conn.execute(
                "INSERT INTO meta (run_id, payload) VALUES (?, ?)", (run_id, meta)
            )
    conn.close()


def raw_sqlite(path: str) -> Callable[[], int]:
    import apsw

    def run() -> int:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        seen, after = 0, ""
        while True:
            page = conn.execute(
                "SELECT run_id, payload FROM meta WHERE run_id > ? ORDER BY run_id LIMIT 500",
                (after,),
            ).fetchall()
            for run_id, meta in page:
                json.loads(str(meta))
                entries = [
                    json.loads(str(row[0]))
                    for row in conn.execute(
                        "SELECT payload FROM entries WHERE run_id = ? ORDER BY id",
                        (run_id,),
                    ).fetchall()
                ]
                seen += len(entries) > 0
            if len(page) < 500:
                break
            after = str(page[-1][0])
        conn.close()
        return seen

    return run


def seed_postgres(url: str, count: int) -> None:
    import psycopg

    open_store(url).journal.list_runs()  # boot the schema
    schema = url.split("schema=", 1)[1]
    admin = url.split("?", 1)[0]
    with psycopg.connect(admin) as conn, conn.cursor() as cur:
        with cur.copy(
            f'COPY "{schema}".rulvar_entries (run_id, payload) FROM STDIN'
        ) as copy:
            for run_id, entries, _ in rows(count):
                for text in entries:
                    copy.write_row((run_id, text))
        with cur.copy(
            f'COPY "{schema}".rulvar_meta (run_id, payload) FROM STDIN'
        ) as copy:
            for run_id, _, meta in rows(count):
                copy.write_row((run_id, meta))
        conn.commit()


def raw_postgres(url: str) -> Callable[[], int]:
    import psycopg

    schema = url.split("schema=", 1)[1]
    admin = url.split("?", 1)[0]

    def run() -> int:
        seen, after = 0, ""
        with psycopg.connect(admin, autocommit=True) as conn:
            while True:
                page = conn.execute(
                    f'SELECT run_id, payload FROM "{schema}".rulvar_meta WHERE run_id COLLATE "C" > %s '
                    'ORDER BY run_id COLLATE "C" LIMIT 500',
                    (after,),
                ).fetchall()
                for run_id, meta in page:
                    json.loads(meta)
                    [
                        json.loads(r[0])
                        for r in conn.execute(
                            f'SELECT payload FROM "{schema}".rulvar_entries WHERE run_id = %s ORDER BY id',
                            (run_id,),
                        ).fetchall()
                    ]
                    seen += 1
                if len(page) < 500:
                    break
                after = page[-1][0]
        return seen

    return run


def audit_pass(url: str) -> tuple[float, int, int]:
    """Seconds, runs audited and runs reported by the streaming audit (read-only)."""
    with open_store(url, readonly=True) as opened:
        started = time.perf_counter()
        audited = reported = 0
        for audit in iter_run_audits(opened.journal, include_consistent=True):
            audited += 1
            reported += audit.verdict != "consistent"
        return time.perf_counter() - started, audited, reported


def peak_heap_mb(url: str) -> float:
    tracemalloc.start()
    try:
        audit_pass(url)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def command(url: str) -> tuple[float, float, int]:
    """The real ``rulvar runs audit`` as a child: wall seconds, max RSS MB, exit code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "runs", "audit", url, "--timeout", "60"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(before, after) / 1024, done.returncode


def measure(
    name: str,
    url_of: Callable[[int], str],
    seed: Callable[[str, int], None],
    raw_of: Callable[[str], Callable[[], int]],
    count: int,
) -> None:
    small, big = url_of(count // 10), url_of(count)
    started = time.perf_counter()
    seed(small, count // 10)
    seed(big, count)
    print(
        f"{name}: seeded {count // 10} + {count} runs in {time.perf_counter() - started:.1f} s"
    )
    raw = raw_of(big)
    raw_started = time.perf_counter()
    raw()
    raw_s = time.perf_counter() - raw_started
    audit_s, audited, reported = audit_pass(big)
    print(
        f"{name}: audit of {audited} runs ({reported} reported) {audit_s:.2f} s "
        f"= {audited / audit_s:,.0f} runs/s; raw driver pages+loads {raw_s:.2f} s; "
        f"ratio audit/raw {audit_s / raw_s:.2f}x"
    )
    heap_small, heap_big = peak_heap_mb(small), peak_heap_mb(big)
    print(
        f"{name}: peak Python heap {heap_small:.1f} MB at {count // 10} runs, "
        f"{heap_big:.1f} MB at {count} runs (x{heap_big / heap_small:.2f} for 10x the runs)"
    )
    wall, rss, code = command(big)
    print(
        f"{name}: `rulvar runs audit` child {wall:.2f} s, max RSS {rss:.0f} MB, exit {code}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument(
        "--postgres", default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rulvar-bench-audit-") as scratch:
        measure(
            "sqlite",
            lambda n: f"sqlite:///{Path(scratch) / f'audit-{n}.db'}",
            lambda url, n: seed_sqlite(url.removeprefix("sqlite:///"), n),
            lambda url: raw_sqlite(url.removeprefix("sqlite:///")),
            args.runs,
        )
    if args.postgres:
        import psycopg

        schemas: list[str] = []

        def url_of(n: int) -> str:
            schemas.append(f"rulvar_bench_audit_{n}_{os.getpid()}")
            return f"{args.postgres}?schema={schemas[-1]}"

        try:
            measure("postgresql", url_of, seed_postgres, raw_postgres, args.runs)
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
