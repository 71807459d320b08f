"""Wall time of the kill-point suite per backend: printed, never asserted.

Run: ``python bench/bench_kill_points.py [--backends sqlite,file,postgres] [--reps 2]``
(PostgreSQL needs ``RULVAR_TEST_POSTGRES_URL``; it is left out without it).

For each backend: the ten scenarios (target <= 30 s on SQLite on a 2-core
machine) and the store-level table (only its rows the backend has a failpoint
for; the others are reported not run and cost nothing), plus the time of one
bare child start (an interpreter importing the worker module), the floor each
row pays once. SQLite
runs a second time with every child started cold (no child kept started ahead),
for a same-run comparison. The figures move with machine load; compare them
within one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rulvar_conformance import Certification
from rulvar_conformance.harness.certify import run_suites
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_store.backend import parse_store_url, resolve_backend


def child_start_s() -> float:
    """One child start: an interpreter importing the worker's modules."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import rulvar_conformance.kill_points.worker"],
        check=True,
    )
    return time.perf_counter() - started


def bench(url: str, *, warm: bool = True) -> None:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        suite = kill_point_conformance(
            Certification(locations, backend.capabilities), warm=warm
        )
        results = run_suites([suite])
    name = backend.name + ("" if warm else " cold")
    scenarios = [r for r in results if not r.check_id.startswith("kp-store-")]
    table = [r for r in results if r.check_id.startswith("kp-store-")]
    for label, rows in (("ten scenarios", scenarios), ("store-level table", table)):
        ran = [r for r in rows if r.status != "not-run"]
        failed = [r.check_id for r in rows if r.status == "failed"]
        seconds = sum(r.duration_ms for r in rows) / 1000
        per_row = seconds / len(ran) if ran else 0.0
        print(
            f"{name:<11} {label:<18} {seconds:7.2f} s  {len(ran):>3} rows run "
            f"({per_row:.2f} s/row), {len(rows) - len(ran)} not run, "
            f"failed: {', '.join(failed) or 'none'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,file,postgres")
    parser.add_argument(
        "--reps", type=int, default=2, help="cold/warm SQLite pairs to interleave"
    )
    args = parser.parse_args()
    wanted = args.backends.split(",")
    start = child_start_s()
    print(f"one child start (import of the worker): {start:.2f} s")
    with tempfile.TemporaryDirectory(prefix="rulvar-bench-kp-") as scratch:
        root = Path(scratch)
        urls = {"sqlite": f"sqlite:///{root / 'kp.db'}", "file": root.as_uri()}
        pg_url = os.environ.get("RULVAR_TEST_POSTGRES_URL")
        if pg_url:
            urls["postgres"] = pg_url
        for name in wanted:
            if name not in urls:
                print(f"{name:<9} skipped (set RULVAR_TEST_POSTGRES_URL)")
                continue
            bench(urls[name])
        # Same run, interleaved: every child started cold, then warm again, so
        # the pool's saving is read from neighbouring figures.
        if "sqlite" in wanted:
            for _ in range(args.reps):
                bench(urls["sqlite"], warm=False)
                bench(urls["sqlite"], warm=True)


if __name__ == "__main__":
    main()
