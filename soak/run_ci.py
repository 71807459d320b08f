"""CI soak job: ``rulvar soak`` with one profile against SQLite and PostgreSQL.

Usage: ``python soak/run_ci.py [--profile ci|nightly|quick] [--async-profile
none|quick|ci|nightly] [--faults network|server|none ...] [--reports DIR]
[--backend sqlite|postgresql ...]``.
SQLite soaks a scratch file under the reports folder; PostgreSQL soaks a fresh
schema of ``RULVAR_TEST_POSTGRES_URL`` (required: a CI soak never skips the fleet
backend). After the sync rounds each backend is soaked again with its writers on
the asyncio API (``rulvar soak --async``) at ``--async-profile`` (by default
the same profile as the sync rounds; ``none`` skips it). Each round's report
folder (summary, writer logs, tenures.png) is kept under ``--reports``. With
PostgreSQL the fault soaks run last at ``--profile`` (``rulvar soak URL --faults
network`` and ``--faults server``, each on a private cluster the soak starts:
the server at the URL is never cut or killed; ``--faults none`` skips them).
Exits non-zero if any round reports a violation or cannot run.
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


def _soak(profile: str, backend: str, flags: tuple[str, ...], reports: Path) -> int:
    """One round of ``rulvar soak`` with ``flags``; its exit code (0: no violation, quorum met)."""
    label = "-".join([profile, backend, *(flag.lstrip("-") for flag in flags)])
    folder = reports / label
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "rulvar_cli",
        "soak",
        _url(backend, folder),
        "--profile",
        profile,
        "--report",
        str(folder / "report"),
        "--json",
        str(folder / "summary.json"),
        *flags,
    ]
    print(f"== soak {label}", flush=True)
    code = subprocess.run(command, check=False).returncode
    if code == 0:
        summary = json.loads((folder / "summary.json").read_text())
        activity = summary["activity"]
        print(
            f"== {label}: {activity['processes']} processes, "
            f"{activity['takeovers']} takeovers, {activity['stale_probes']} stale "
            f"probes, {activity['pauses']} pauses, {activity['kills']} kills",
            flush=True,
        )
        if "faults" in summary:
            print(f"== {label} faults: {json.dumps(summary['faults'])}", flush=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ci", choices=["quick", "ci", "nightly"])
    parser.add_argument("--reports", default="soak-reports")
    parser.add_argument("--backend", action="append", choices=["sqlite", "postgresql"])
    parser.add_argument(
        "--async-profile",
        choices=["none", "quick", "ci", "nightly"],
        help="profile of the rounds with writers on the asyncio API "
        "(default: --profile's; 'none': skip them)",
    )
    parser.add_argument(
        "--faults",
        action="append",
        choices=["network", "server", "none"],
        help="PostgreSQL fault soaks to run (default both; 'none': skip them)",
    )
    args = parser.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    rounds: list[tuple[str, str, tuple[str, ...]]] = [
        (args.profile, backend, ()) for backend in backends
    ]
    async_profile = args.async_profile or args.profile
    if async_profile != "none":
        rounds += [(async_profile, backend, ("--async",)) for backend in backends]
    if "postgresql" in backends:
        kinds = args.faults or ["network", "server"]
        rounds += [
            (args.profile, "postgresql", ("--faults", kind))
            for kind in kinds
            if kind != "none"
        ]
    failed = [
        f"{backend}{''.join(' ' + flag for flag in flags)} (exit {code})"
        for profile, backend, flags in rounds
        if (code := _soak(profile, backend, flags, Path(args.reports)))
    ]
    if failed:
        print(f"soak {args.profile} FAILED on: {', '.join(failed)}", flush=True)
        return 1
    print(f"soak {args.profile}: no violations on any backend", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
