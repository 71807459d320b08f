"""``rulvar soak``: storm a fresh location next to URL with writer processes and chaos."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rulvar_cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    SOAK_EXIT_CODES_HELP,
    fail,
    sqlite_installed,
)
from rulvar_store.backend import parse_store_url, resolve_backend

if TYPE_CHECKING:
    from rulvar_conformance.soak.runner import SoakResult

__all__ = ["soak_command"]

_NEEDS = frozenset({"leases", "fenced_writes", "fenced_transcripts"})


def _progress_line(
    elapsed: float, activity: dict[str, int], goal: dict[str, int]
) -> str:
    def part(label: str, key: str) -> str:
        need = goal.get(key, 0)
        return f"{label} {activity.get(key, 0)}" + (f"/{need}" if need else "")

    parts = [
        part("takeovers", "takeovers"),
        part("stale refused", "stale_rejects"),
        part("pauses", "pauses"),
        part("kills", "kills"),
        part("accepted", "accepted"),
    ]
    return f"\r  {elapsed:6.1f} s  " + "  ".join(parts) + "   "


def _rows(
    result: SoakResult, summary: dict[str, Any], wall_s: float
) -> list[tuple[str, str]]:
    a, h = result.activity, result.health
    unknown = summary["unknown_outcomes"]
    resolved = ", ".join(f"{k} x{v}" for k, v in unknown["resolved"].items()) or "none"
    resume = h.get("resume_to_next_outcome_ms", {})
    return [
        ("writer processes", f"{a.get('processes', 0)} (respawns included)"),
        ("lease grants / takeovers", f"{a.get('epochs', 0)} / {a.get('takeovers', 0)}"),
        (
            "stale probes refused",
            f"{a.get('stale_rejects', 0)} of {a.get('stale_probes', 0)}",
        ),
        (
            "SIGSTOP pauses",
            f"{a.get('pauses', 0)} ({a.get('pauses_inside_call', 0)} inside a store call, "
            f"{a.get('pauses_in_transaction', 0)} inside its write transaction)",
        ),
        (
            "SIGKILL + respawn",
            f"{a.get('kills', 0)} ({a.get('kills_inside_call', 0)} inside a store call)",
        ),
        ("unknown outcomes", f"{unknown['count']}: {resolved}"),
        (
            "accepted writes",
            f"{a.get('accepted', 0)} (appends {a.get('appends', 0)}, meta {a.get('meta', 0)}, "
            f"blob puts {a.get('blob_puts', 0)}, blob deletes {a.get('blob_deletes', 0)}, "
            f"run deletes {a.get('holder_deletes', 0)})",
        ),
        (
            "victims / live cross-run refusals",
            f"{a.get('victims', 0)} / {a.get('live_cross_rejects', 0)}",
        ),
        (
            "stalls past the ttl / releases",
            f"{a.get('stalls', 0)} / {a.get('releases', 0)}",
        ),
        ("busy retries", str(h.get("busy_retries", 0))),
        (
            "least served writer / mean",
            f"{h.get('least_served', 0)} / {h.get('mean_served', 0)} accepted",
        ),
        (
            "longest write drought",
            f"{h.get('longest_write_drought_ms', 0):.0f} ms: {h.get('drought_cause', '')}",
        ),
        ("pauses that froze every writer", _inside(h.get("pauses_inside_a_call", {}))),
        (
            "SIGCONT to next outcome",
            f"mean {resume.get('mean', '-')} ms, max {resume.get('max', '-')} ms "
            f"({resume.get('paused_while_booting', 0)} paused while booting, not counted)",
        ),
        (
            "first write after the spawn",
            f"{(h.get('first_write_ms') or 0) / 1000:.1f} s (boot)",
        ),
        (
            "companion appends / runs",
            f"{a.get('companion_appends', 0)} / {a.get('companion_runs', 0)} "
            "(threads sharing each writer's handle)",
        ),
        ("journal entries at the end", str(result.journal_entries)),
        ("storm / wall time", f"{result.storm_ms / 1000:.1f} s / {wall_s:.1f} s"),
        ("violations", str(len(result.violations))),
    ]


def _inside(row: dict[str, Any]) -> str:
    """Pauses inside a call during which no other writer wrote anything."""
    if not row.get("count"):
        return "none of 0 pauses inside a call"
    return (
        f"{row['blocked_everyone']} of {row['count']} pauses inside a call "
        f"(longest {row['longest_blocked_ms']:.0f} ms)"
    )


@click.command("soak", epilog=SOAK_EXIT_CODES_HELP)
@click.argument("url", required=False)
@click.option(
    "--profile",
    "profile_name",
    default="quick",
    show_default=True,
    type=click.Choice(["quick", "ci", "nightly"]),
    help="Soak size.",
)
@click.option(
    "--writers",
    type=click.IntRange(min=1),
    help="Writer processes (default: the profile's).",
)
@click.option(
    "--companions",
    type=click.IntRange(min=0),
    help="Threads per writer process appending through its handle (default: the "
    "profile's; 0: the writer alone).",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0.1),
    help="Cap in seconds; reaching it before the quorum is a violation.",
)
@click.option(
    "--seed",
    type=int,
    help="Seed of the writers' and the chaos PRNGs (default: the profile's).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    help="Also write the JSON summary here.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    help="Keep the report folder here: summary, logs, tenures.png.",
)
def soak_command(
    url: str | None,
    profile_name: str,
    writers: int | None,
    companions: int | None,
    seconds: float | None,
    seed: int | None,
    json_path: str | None,
    report_dir: str | None,
) -> None:
    """Storm a fresh location next to URL with writer processes, pauses and kills.

    The soak runs in a new file or schema beside URL's (never your runs), stops
    at the profile's quorum, and rebuilds the serial history the fencing epochs
    promise from every writer's log and diffs it against the store. Exit 0: no
    violation; 1: violations (listed); 2: usage or configuration mistake.
    Without URL: a temporary SQLite file (the 'sqlite' extra).
    """
    if url is None:
        with tempfile.TemporaryDirectory(prefix="rulvar-soak-") as scratch_store:
            _soak(
                _default_soak_url(scratch_store),
                profile_name,
                writers,
                companions,
                seconds,
                seed,
                json_path,
                report_dir,
            )
        return
    _soak(
        url, profile_name, writers, companions, seconds, seed, json_path, report_dir
    )


def _default_soak_url(scratch: str) -> str:
    """A SQLite file in ``scratch``; without SQLite, one line says what to give."""
    if not sqlite_installed():
        fail(
            "config",
            "no URL and SQLite is not installed: install the 'sqlite' extra "
            "(apsw) or give the URL of a store with leases across processes "
            "(postgresql://...)",
            EXIT_USAGE,
        )
    return f"sqlite:///{Path(scratch) / 'rulvar-soak.db'}"


def _soak(
    url: str,
    profile_name: str,
    writers: int | None,
    companions: int | None,
    seconds: float | None,
    seed: int | None,
    json_path: str | None,
    report_dir: str | None,
) -> None:
    """The soak of ``url`` (see ``soak_command``)."""
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    missing = sorted(_NEEDS - backend.capabilities)
    if missing or backend.certify is None:
        raise click.UsageError(
            f"backend {backend.name!r} cannot be soaked: it lacks "
            f"{', '.join(missing) or 'fresh locations (certify)'}"
        )
    # The kit is imported only here: other commands must not pay for it.
    import time

    from rulvar_conformance.soak.profiles import profile_named
    from rulvar_conformance.soak.report import INSTALL_HINT, summary_of
    from rulvar_conformance.soak.runner import run_multi_process_soak

    profile = profile_named(profile_name)
    live = sys.stdout.isatty()
    goal = {
        "takeovers": profile.quorum.takeovers,
        "stale_rejects": profile.quorum.stale_probes,
        "pauses": profile.quorum.pauses,
        "kills": profile.quorum.kills,
    }

    def progress(elapsed: float, activity: dict[str, int]) -> None:
        if live:
            click.echo(_progress_line(elapsed, activity, goal), nl=False)

    n_writers = writers or profile.writers
    click.echo(
        f"soaking {parsed.redacted} ({backend.name}), profile {profile.name}: "
        f"{n_writers} writers, ttl {profile.ttl_ms} ms, cap {seconds or profile.seconds:g} s"
    )
    scratch = (
        None
        if report_dir
        else tempfile.TemporaryDirectory(prefix="rulvar-soak-report-")
    )
    folder = report_dir or scratch.name  # type: ignore[union-attr]  # one of the two is set
    started = time.monotonic()
    try:
        with backend.certify(parsed) as locations:
            location = locations()
            try:
                result = run_multi_process_soak(
                    location,
                    writers=n_writers,
                    seconds=seconds or profile.seconds,
                    seed=profile.seed if seed is None else seed,
                    ttl_ms=profile.ttl_ms,
                    runs=profile.runs,
                    chaos=profile.chaos,
                    quorum=profile.quorum,
                    report_dir=folder,
                    on_progress=progress,
                    raise_on_violation=False,
                    companions=profile.companions if companions is None else companions,
                )
            finally:
                location.remove()
        wall_s = time.monotonic() - started
        if live:
            click.echo()
        summary = summary_of(result)
        drawn = (Path(folder) / "tenures.png").exists()
        summary["wall_s"] = round(wall_s, 1)
        for label, value in _rows(result, summary, wall_s):
            click.echo(f"  {label:<34} {value}")
        if json_path:
            Path(json_path).write_text(
                json.dumps(summary, indent=2) + "\n", encoding="utf-8"
            )
        if report_dir:
            click.echo(
                f"report: {report_dir} (summary.json, logs/, chaos.jsonl"
                + (", tenures.png)" if drawn else ")")
            )
        if not drawn:
            click.echo(
                f"no picture drawn: matplotlib is missing; install it with {INSTALL_HINT}"
            )
    finally:
        if scratch is not None:
            scratch.cleanup()
    if result.violations:
        click.echo(
            f"store-conformance multi-process-soak: {len(result.violations)} violation(s)"
        )
        for line in result.violations:
            click.echo(f"- {line}")
        sys.exit(EXIT_FAILED)
    click.echo("no violations")
