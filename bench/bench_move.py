"""Moving runs from SQLite to PostgreSQL: ``rulvar runs copy`` against a bare COPY.

Run: ``python bench/bench_move.py [--runs 10000] [--entries 100] [--blobs 5]
[--rounds 1] [--url URL]``

The issue's target scale is the default: 10,000 runs of 100 entries (1,000,000
entries) and 5 blobs (50,000 blobs) each, in a SQLite file at synchronous=FULL.
Each round copies it twice into fresh schemas of ``--url`` (default
``RULVAR_TEST_POSTGRES_URL`` or the local test server), alternating which goes
first, each in a child process of its own whose peak resident memory
(``ru_maxrss``) is read after it exits:

- ``rulvar runs copy SRC DST --all``: the command as users run it. Every run
  under the mover's lease at both ends (two SQLite commits and two PostgreSQL
  lease calls per run), its rows by ``COPY`` inside the fenced transaction, the
  destination's epoch counter raised past the source's.
- the floor: the same rows read from the SQLite file and loaded by one
  ``COPY`` per table into the same five tables (indexes included), with no
  lease, no fence, no per-run transaction: what a bare bulk load costs.

The ratio is copy time / floor time (target: within 2x); the memory target is
under 200 MiB for the copy. Both destinations are counted afterwards (entries,
metas, blobs, epochs) and the schemas dropped.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

SEED_PAD: Final = "x" * 120
BLOB: Final = os.urandom(1024)


def _url(given: str | None) -> str:
    return (
        given
        or os.environ.get("RULVAR_TEST_POSTGRES_URL")
        or "postgresql://postgres@127.0.0.1:5432/test"
    )


def seed(path: Path, runs: int, entries: int, blobs: int) -> None:
    """Write the source in the store's format with raw SQL (one transaction)."""
    import apsw

    from rulvar_store_sqlite import SqliteStore

    SqliteStore(str(path)).close()  # the schema, as the store creates it
    connection = apsw.Connection(str(path))
    connection.execute("BEGIN")
    for r in range(runs):
        run_id = f"run-{r:06d}"
        connection.executemany(
            "INSERT INTO entries (run_id, payload) VALUES (?, ?)",
            (
                (
                    run_id,
                    f'{{"seq":{n + 1},"kind":"step","key":"k-{n}","status":"ok","value":"{SEED_PAD}"}}',
                )
                for n in range(entries)
            ),
        )
        connection.execute(
            "INSERT INTO meta (run_id, payload) VALUES (?, ?)",
            (run_id, f'{{"runId":"{run_id}","status":"ok","name":"bench"}}'),
        )
        connection.executemany(
            "INSERT INTO blobs (ref, run_id, data) VALUES (?, ?, ?)",
            ((f"{run_id}/ckpt/{b}", run_id, BLOB) for b in range(blobs)),
        )
        connection.execute(
            "INSERT INTO epochs (run_id, epoch) VALUES (?, ?)", (run_id, 1 + r % 7)
        )
    connection.execute("COMMIT")
    connection.close()


def floor_child(source: str, url: str, schema: str) -> None:
    """The bare bulk load: every table's rows by one COPY each, no lease, no fence."""
    import apsw
    import psycopg

    from rulvar_store_postgres import PostgresStore

    store = PostgresStore(url, schema=schema)
    store.list_runs()  # boots the schema: the same five tables and indexes
    store.close()
    sqlite = apsw.Connection(source, flags=apsw.SQLITE_OPEN_READONLY)
    with psycopg.connect(url, autocommit=False) as conn, conn.cursor() as cursor:
        q = f'"{schema}"'
        for table, columns, query in (
            (
                "rulvar_entries",
                "(run_id, payload)",
                "SELECT run_id, payload FROM entries ORDER BY id",
            ),
            ("rulvar_meta", "(run_id, payload)", "SELECT run_id, payload FROM meta"),
            (
                "rulvar_blobs",
                "(ref, run_id, data)",
                "SELECT ref, run_id, data FROM blobs",
            ),
            (
                "rulvar_epochs",
                "(run_id, epoch)",
                "SELECT run_id, epoch + 1 FROM epochs",
            ),
        ):
            with cursor.copy(f"COPY {q}.{table} {columns} FROM STDIN") as copy:
                for row in sqlite.execute(query):
                    copy.write_row(row)
        conn.commit()


_SELF_RSS: Final = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print('peak-rss-kib', "
    "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "from rulvar_cli import main\n"
    "main(sys.argv[1:])\n"
)


def _measured(command: list[str]) -> tuple[float, float]:
    """Run ``command`` as a child; return (seconds, its own peak RSS in MiB).

    The child prints its ``ru_maxrss`` at exit (RUSAGE_CHILDREN would report the
    largest of all children so far, the floor's included).
    """
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if finished.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{finished.stderr[-2000:]}")
    peaks = [
        line.split()[1]
        for line in finished.stderr.splitlines()
        if line.startswith("peak-rss-kib")
    ]
    return elapsed, (int(peaks[-1]) / 1024 if peaks else 0.0)


def _counts(url: str, schema: str) -> tuple[int, ...]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        q = f'"{schema}"'
        row = conn.execute(
            f"SELECT (SELECT count(*) FROM {q}.rulvar_entries), (SELECT count(*) FROM {q}.rulvar_meta), "
            f"(SELECT count(*) FROM {q}.rulvar_blobs), (SELECT count(*) FROM {q}.rulvar_epochs)"
        ).fetchone()
        conn.execute(f"DROP SCHEMA IF EXISTS {q} CASCADE")
    assert row is not None
    return tuple(int(value) for value in row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=100, help="entries per run")
    parser.add_argument("--blobs", type=int, default=5, help="blobs per run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--url", default=None)
    parser.add_argument(
        "--floor-child",
        nargs=3,
        metavar=("SRC", "URL", "SCHEMA"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.floor_child:
        floor_child(*args.floor_child)
        return
    url = _url(args.url)
    expected = (args.runs * args.entries, args.runs, args.runs * args.blobs, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source.db"
        started = time.perf_counter()
        seed(source, args.runs, args.entries, args.blobs)
        print(
            f"source: {args.runs} runs, {expected[0]} entries, {expected[2]} blobs "
            f"({source.stat().st_size / 2**20:.0f} MiB) seeded in {time.perf_counter() - started:.1f} s"
        )
        copies: list[float] = []
        floors: list[float] = []
        peaks: list[float] = []
        for round_number in range(args.rounds):
            order = ("copy", "floor") if round_number % 2 == 0 else ("floor", "copy")
            for kind in order:
                schema = f"bench_move_{secrets.token_hex(4)}"
                if kind == "copy":
                    seconds, peak = _measured(
                        [
                            sys.executable,
                            "-c",
                            _SELF_RSS,
                            "runs",
                            "copy",
                            f"sqlite:///{source}",
                            f"{url}{'&' if '?' in url else '?'}schema={schema}",
                            "--all",
                            "--json",
                            "--timeout",
                            "60",
                        ]
                    )
                    copies.append(seconds)
                    peaks.append(peak)
                else:
                    seconds, _ = _measured(
                        [
                            sys.executable,
                            __file__,
                            "--floor-child",
                            str(source),
                            url,
                            schema,
                        ]
                    )
                    floors.append(seconds)
                counts = _counts(url, schema)
                if counts != expected:
                    sys.exit(
                        f"{kind}: the destination holds {counts}, expected {expected}"
                    )
                print(f"round {round_number + 1} {kind:>5}: {seconds:7.1f} s")
    copy, floor = statistics.median(copies), statistics.median(floors)
    ratio = copy / floor
    print(
        f"rulvar runs copy: {copy:.1f} s ({expected[0] / copy:,.0f} entries/s), "
        f"bare COPY: {floor:.1f} s, ratio {ratio:.2f}x (target within 2x); "
        f"peak RSS of the copy {max(peaks):.0f} MiB (target under 200 MiB)"
    )


if __name__ == "__main__":
    main()
