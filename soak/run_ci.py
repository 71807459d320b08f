"""CI soak job: ``rulvar soak`` with one profile against SQLite and PostgreSQL.

Usage: ``python soak/run_ci.py [--profile ci|nightly|quick] [--reports DIR]
[--backend sqlite|postgresql ...] [--faults network|server|none ...]``. With
PostgreSQL it also runs the fault soaks (``rulvar soak URL --faults network``
and ``--faults server``, each on a private cluster the soak starts: the server
at the URL is never cut or killed). SQLite soaks a scratch file under the reports
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
    parser.add_argument(
        "--faults", action="append", choices=["network", "server", "none"]
    )
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
    backends = args.backend or ["sqlite", "postgresql"]
    kinds = [] if "postgresql" not in backends else args.faults or ["network", "server"]
    for kind in [kind for kind in kinds if kind != "none"]:
        code = _fault_soak(kind, args.profile, Path(args.reports))
        if code != 0:
            failed.append(f"postgresql --faults {kind} (exit {code})")
    if failed:
        print(f"soak {args.profile} FAILED on: {', '.join(failed)}", flush=True)
        return 1
    print(f"soak {args.profile}: no violations on any backend", flush=True)
    return 0


def _fault_soak(kind: str, profile: str, reports: Path) -> int:
    """``rulvar soak URL --faults KIND``; prints what the faults did."""
    folder = reports / f"{profile}-postgresql-faults-{kind}"
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "rulvar_cli", "soak", _url("postgresql", folder),
        "--faults", kind, "--profile", profile,
        "--report", str(folder / "report"), "--json", str(folder / "summary.json"),
    ]  # fmt: skip
    print(f"== soak {profile} on postgresql, {kind} faults", flush=True)
    code = subprocess.run(command, check=False).returncode
    if code == 0:
        faults = json.loads((folder / "summary.json").read_text())["faults"]
        print(f"== {kind} faults: {json.dumps(faults, sort_keys=True)}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
