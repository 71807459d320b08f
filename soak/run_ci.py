"""CI soak job: ``rulvar soak`` with one profile against SQLite and PostgreSQL.

Usage: ``python soak/run_ci.py [--profile ci|nightly|quick] [--reports DIR]
[--backend sqlite|postgresql ...]``. SQLite soaks a scratch file under the reports
folder; PostgreSQL soaks a fresh schema of ``RULVAR_TEST_POSTGRES_URL`` (required:
a CI soak never skips the fleet backend). Each backend's report folder (summary,
writer logs, tenures.png) is kept under ``--reports``. Exits non-zero if any
backend reports a violation or cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def _url(backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder.resolve() / 'soak-target.db'}"
    url = os.environ.get("RULVAR_TEST_POSTGRES_URL") or os.environ.get(
        "RULVAR_POSTGRES_URL"
    )
    if not url:
        raise SystemExit(
            "soak/run_ci.py: set RULVAR_TEST_POSTGRES_URL to soak PostgreSQL"
        )
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ci", choices=["quick", "ci", "nightly"])
    parser.add_argument("--reports", default="soak-reports")
    parser.add_argument("--backend", action="append", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    failed = []
    for backend in args.backend or ["sqlite", "postgresql"]:
        folder = Path(args.reports) / f"{args.profile}-{backend}"
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "rulvar_cli",
            "soak",
            _url(backend, folder),
            "--profile",
            args.profile,
            "--report",
            str(folder / "report"),
            "--json",
            str(folder / "summary.json"),
        ]
        print(f"== soak {args.profile} on {backend}", flush=True)
        code = subprocess.run(command, check=False).returncode
        if code != 0:
            failed.append(f"{backend} (exit {code})")
            continue
        activity = json.loads((folder / "summary.json").read_text())["activity"]
        print(
            f"== {backend}: {activity['processes']} processes, "
            f"{activity['takeovers']} takeovers, {activity['stale_probes']} stale probes, "
            f"{activity['pauses']} pauses, {activity['kills']} kills",
            flush=True,
        )
    if failed:
        print(f"soak {args.profile} FAILED on: {', '.join(failed)}", flush=True)
        return 1
    print(f"soak {args.profile}: no violations on any backend", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
