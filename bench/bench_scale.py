"""How read costs grow with the work: long journals, polling observers, many runs.

Run: ``python bench/bench_scale.py [--backend sqlite|postgresql|all] [--reps 3]
[--sizes 1000,10000,100000] [--runs 1000,10000,100000] [--url URL]``

Not timed tests: each figure is printed per repetition with its median, so
growth is read off the table (per-entry or per-call cost at each size).

- ``load`` of a journal of N entries: microseconds per entry (should stay flat),
  the same-run ratio to the raw SELECT + orjson floor (the two run in
  alternating chunks after a warm-up call each), and the peak memory
  Python allocates during one load (``tracemalloc``, measured in a separate
  call so it does not slow the timed ones), per entry;
- ``load_since`` by an observer polling a live run of N entries for the 10
  entries appended since its last cursor: microseconds per poll (should stay
  flat: O(new entries), whereas ``load`` is O(N));
- ``list_runs(RunFilter(status=...))`` matching 1 % of R runs and ``get_meta``
  of one run among R: microseconds per call (``get_meta`` flat, ``list_runs``
  growing with the matches, not with R).

SQLite runs at synchronous=FULL in a temp file; PostgreSQL in a fresh schema of
``--url`` (default ``RULVAR_TEST_POSTGRES_URL`` or the local test server),
dropped at the end. Bulk rows are written with raw SQL in the store's format so
setting up 100,000 entries does not take 100,000 durable commits.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
import tracemalloc
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from rulvar_store import RunFilter
from rulvar_store.backend import dump_record

STATUSES = ("running", "ok", "error", "suspended", "cancelled")


def entry(seq: int) -> dict[str, Any]:
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"bench-{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, "pad": "x" * 300},
    }


def meta(n: int) -> dict[str, Any]:
    # 1 % of the runs are "suspended": the filtered listing returns R/100 metas.
    status = "suspended" if n % 100 == 0 else STATUSES[n % 5 if n % 5 != 3 else 1]
    return {"runId": f"run-{n:06d}", "status": status, "updatedAt": "t", "name": "job"}


class Backend(ABC):
    """A store plus raw access to the same database, for bulk setup and the floor."""

    name: str
    store: Any

    @abstractmethod
    def bulk_entries(self, run: str, count: int) -> None:
        """Insert ``count`` entries of ``run`` in bulk, bypassing the store."""

    @abstractmethod
    def bulk_metas(self, count: int) -> None:
        """Insert ``count`` metas in bulk, bypassing the store."""

    @abstractmethod
    def floor_load(self, run: str) -> list[Any]:
        """Load ``run`` the fastest raw way: the SELECT + orjson floor."""


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        from rulvar_store_sqlite import SqliteStore

        self.store = SqliteStore(str(directory / "scale.db"))
        self.raw = self.store._conn  # same file, same connection: reads only

    def bulk_entries(self, run: str, count: int) -> None:
        with self.raw:
            self.raw.executemany(
                "INSERT INTO entries (run_id, payload) VALUES (?, ?)",
                ((run, dump_record(entry(i))) for i in range(count)),
            )

    def bulk_metas(self, count: int) -> None:
        with self.raw:
            self.raw.execute("DELETE FROM meta")
            self.raw.executemany(
                "INSERT INTO meta (run_id, payload) VALUES (?, ?)",
                ((f"run-{n:06d}", dump_record(meta(n))) for n in range(count)),
            )

    def floor_load(self, run: str) -> list[Any]:
        rows = self.raw.execute(
            "SELECT payload FROM entries WHERE run_id = ? ORDER BY id", (run,)
        ).fetchall()
        return [orjson.loads(row[0]) for row in rows]

    def close(self) -> None:
        self.store.close()


class PostgresBackend(Backend):
    name = "postgresql"

    def __init__(self, url: str) -> None:
        import psycopg

        from rulvar_store_postgres import PostgresStore

        self.schema = f"rulvar_scale_{secrets.token_hex(4)}"
        self.q = f'"{self.schema}"'
        self.store = PostgresStore(url, schema=self.schema)
        self.store.get_meta("boot")
        self.raw = psycopg.connect(url, autocommit=True)

    def bulk_entries(self, run: str, count: int) -> None:
        with (
            self.raw.cursor() as cursor,
            cursor.copy(
                f"COPY {self.q}.rulvar_entries (run_id, payload) FROM STDIN"
            ) as copy,
        ):
            for i in range(count):
                copy.write_row((run, dump_record(entry(i))))

    def bulk_metas(self, count: int) -> None:
        self.raw.execute(f"DELETE FROM {self.q}.rulvar_meta")
        with (
            self.raw.cursor() as cursor,
            cursor.copy(
                f"COPY {self.q}.rulvar_meta (run_id, payload) FROM STDIN"
            ) as copy,
        ):
            for n in range(count):
                copy.write_row((f"run-{n:06d}", dump_record(meta(n))))
        self.raw.execute(f"ANALYZE {self.q}.rulvar_meta")

    def floor_load(self, run: str) -> list[Any]:
        rows = self.raw.execute(
            f"SELECT payload FROM {self.q}.rulvar_entries WHERE run_id = %s ORDER BY id",
            (run,),
        ).fetchall()
        return [orjson.loads(row[0]) for row in rows]

    def close(self) -> None:
        self.store.close()
        self.raw.execute(f"DROP SCHEMA IF EXISTS {self.q} CASCADE")
        self.raw.close()


def timed(call: Callable[[], object], repeat: int) -> float:
    began = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - began) / repeat


CHUNKS = 5


def paired(
    ours: Callable[[], object], floor: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Mean seconds per call of ``ours`` and ``floor``, run in alternating chunks.

    Both are called once first (warm caches), then ``repeat`` times each in
    ``CHUNKS`` alternating slices, so a load swing on a shared machine hits
    both alike instead of whichever ran second.
    """
    ours()
    floor()
    chunk = max(1, repeat // CHUNKS)
    spent_ours = spent_floor = 0.0
    for _ in range(CHUNKS):
        spent_ours += timed(ours, chunk) * chunk
        spent_floor += timed(floor, chunk) * chunk
    calls = chunk * CHUNKS
    return spent_ours / calls, spent_floor / calls


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def med(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} [{min(values):,.2f}-{max(values):,.2f}]"


def journals(backend: Backend, sizes: list[int], reps: int) -> None:
    store = backend.store
    print(f"\n[{backend.name}] load and load_since of one run's journal")
    print(
        "  entries | load us/entry (median [min-max]) | load / floor speed | "
        "peak MB (per entry KB) | load_since 10 new, us/poll"
    )
    for size in sizes:
        run = f"journal-{size}"
        backend.bulk_entries(run, size)
        repeat = max(1, 20_000 // size)
        per_entry: list[float] = []
        ratios: list[float] = []
        polls: list[float] = []
        seq = size
        for _ in range(reps):
            ours, floor = paired(
                lambda: store.load(run),  # noqa: B023
                lambda: backend.floor_load(run),  # noqa: B023
                repeat,
            )
            per_entry.append(ours / size * 1e6)
            ratios.append(floor / ours)
            cursor = store.load_since(run).cursor
            spent = 0.0
            for _ in range(20):
                for _ in range(10):
                    store.append(run, entry(seq))
                    seq += 1
                began = time.perf_counter()
                tail = store.load_since(run, cursor)
                spent += time.perf_counter() - began
                assert len(tail.entries) == 10
                cursor = tail.cursor
            polls.append(spent / 20 * 1e6)
        peak = peak_bytes(lambda: store.load(run))  # noqa: B023
        print(
            f"  {size:>7,} | {med(per_entry):>24s} | {med(ratios):>18s} | "
            f"{peak / 1e6:8.1f} ({peak / size / 1e3:.2f}) | {med(polls)}"
        )


def many_runs(backend: Backend, counts: list[int], reps: int) -> None:
    store = backend.store
    print(f"\n[{backend.name}] metas of many runs")
    print("  runs    | list_runs(status) us/call, 1% match | get_meta us/call")
    for count in counts:
        backend.bulk_metas(count)
        listing: list[float] = []
        lookups: list[float] = []
        wanted = RunFilter(status="suspended")
        expected = len([n for n in range(count) if n % 100 == 0])
        for _ in range(reps):
            listing.append(timed(lambda: store.list_runs(wanted), 5) * 1e6)  # noqa: B023
            names = [f"run-{(n * 7919) % count:06d}" for n in range(200)]
            began = time.perf_counter()
            for name in names:
                assert store.get_meta(name) is not None
            lookups.append((time.perf_counter() - began) / len(names) * 1e6)
        assert len(store.list_runs(wanted)) == expected
        print(f"  {count:>7,} | {med(listing):>36s} | {med(lookups)}")


@contextmanager
def opened(name: str, url: str) -> Iterator[Backend]:
    if name == "sqlite":
        with tempfile.TemporaryDirectory(prefix="rulvar-scale-") as scratch:
            backend: Any = SqliteBackend(Path(scratch))
            try:
                yield backend
            finally:
                backend.close()
    else:
        backend = PostgresBackend(url)
        try:
            yield backend
        finally:
            backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend", default="all", choices=["sqlite", "postgresql", "all"]
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", default="1000,10000,100000")
    parser.add_argument(
        "--url",
        default=os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test",
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    counts = [int(n) for n in args.runs.split(",")]
    names = ["sqlite", "postgresql"] if args.backend == "all" else [args.backend]
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.reps} reps"
    )
    for name in names:
        with opened(name, args.url) as backend:
            journals(backend, sizes, args.reps)
            many_runs(backend, counts, args.reps)


if __name__ == "__main__":
    main()
