"""``rulvar soak URL --faults failover``: a replicated cluster's leader failing over."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from pathlib import Path
from typing import NoReturn

import click

from rulvar_cli._common import EXIT_FAILED, EXIT_USAGE, fail
from rulvar_store import ConfigError

__all__ = ["failover_soak"]


def failover_soak(
    mode: str,
    profile_name: str,
    writers: int | None,
    seconds: float | None,
    seed: int | None,
    json_path: str | None,
    report_dir: str | None,
) -> NoReturn:
    """Run the failover soak (``faults.failover``), print its rows, exit 0, 1 or 2.

    Exit 2 when this machine cannot run it (not root, no etcd, no Patroni venv,
    no PostgreSQL server binaries): the line says what is missing.
    """
    from rulvar_conformance.faults.failover import FAILOVER_PLANS, run_failover_soak
    from rulvar_conformance.faults.patroni_cluster import failover_unavailable

    missing = failover_unavailable()
    if missing is not None:
        fail("config", f"the failover soak cannot run here: {missing}", EXIT_USAGE)
    plan = FAILOVER_PLANS["ci" if profile_name == "nightly" else profile_name]
    changes: dict[str, object] = {}
    if writers:
        changes["writers"] = writers
    if seconds:
        changes["cap_s"] = seconds
    plan = dataclasses.replace(plan, **changes)  # type: ignore[arg-type]
    counts = ", ".join(f"{kind} x{n}" for kind, n in plan.counts().items())
    click.echo(
        f"failover soak: a private 3-node Patroni/etcd cluster (the server at the URL "
        f"is not touched), mode {mode}, profile {profile_name}: {plan.writers} writers, "
        f"faults {counts}, cap {plan.cap_s:g} s"
    )
    # A SIGTERM (a CI timeout) unwinds like Ctrl-C: the soak's clean-up kills every
    # process it started and removes its namespaces and folders.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = run_failover_soak(
            mode, plan, seed=seed or 1, report_dir=report_dir, say=click.echo
        )
    except ConfigError as exc:
        fail("config", str(exc), EXIT_USAGE)
    for label, value in result.verdict.rows:
        click.echo(f"  {label:<40} {value}")
    click.echo(
        f"  {'wall time':<40} {result.wall_s:.0f} s (cluster up in {result.setup_s:.0f} s)"
    )
    if json_path:
        Path(json_path).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    if report_dir:
        click.echo(f"report: {report_dir} (summary.json, actions.jsonl, logs/)")
    for line in result.verdict.violations:
        click.echo(f"VIOLATION {line}")
    click.echo(
        "passed" if result.passed else f"{len(result.verdict.violations)} violation(s)"
    )
    sys.exit(0 if result.passed else EXIT_FAILED)
