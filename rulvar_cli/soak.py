"""``rulvar soak``: storm a fresh location next to URL with writer processes and chaos."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

import click

from rulvar_cli._common import (
    EXIT_FAILED,
    EXIT_SOAK_QUORUM,
    EXIT_USAGE,
    SOAK_EXIT_CODES_HELP,
    fail,
    sqlite_installed,
)
from rulvar_store import ConfigError
from rulvar_store.backend import parse_store_url, resolve_backend

if TYPE_CHECKING:
    from rulvar_conformance.soak.summary import SoakActivity, SoakSummary

__all__ = ["soak_command"]

_NEEDS = frozenset({"leases", "fenced_writes", "fenced_transcripts"})
_EXIT_OF: Final = {
    "passed": 0,
    "violations": EXIT_FAILED,
    "quorum-not-reached": EXIT_SOAK_QUORUM,
}


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
    help="Cap in seconds; reaching it before the quorum ends the soak without a "
    "verdict (exit 3).",
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
    "--async",
    "through_async",
    is_flag=True,
    help="Writers (and the referee's reads) go through open_store_async, driven "
    "from their threads by an event loop in each process.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    help="Keep the report folder here: summary, logs, tenures.png.",
)
@click.option(
    "--faults",
    type=click.Choice(["network", "server", "failover"]),
    help="PostgreSQL only: soak a private cluster this command starts (never the "
    "server at URL) under network faults (writer hosts cut off past their ttl, "
    "connection resets, slow links), server faults (SIGKILL and restart) or "
    "failover (a 3-node Patroni/etcd cluster whose leader is killed, frozen, cut "
    "off and switched over; root, etcd-server and Patroni: see ci/install.sh).",
)
@click.option(
    "--mode",
    "replication_mode",
    type=click.Choice(["async", "sync", "sync-strict", "quorum"]),
    default="sync-strict",
    show_default=True,
    help="--faults failover: the cluster's replication mode (Patroni's "
    "synchronous_mode off, on, on + strict, quorum + strict).",
)
def soak_command(
    url: str | None,
    profile_name: str,
    writers: int | None,
    companions: int | None,
    seconds: float | None,
    seed: int | None,
    json_path: str | None,
    through_async: bool,
    report_dir: str | None,
    faults: str | None,
    replication_mode: str,
) -> None:
    """Storm a fresh location next to URL with writer processes, pauses and kills.

    The soak runs in a new file or schema beside URL's (never your runs), stops
    at the profile's quorum, and rebuilds the serial history the fencing epochs
    promise from every writer's log and diffs it against the store.
    Without URL: a temporary SQLite file (the 'sqlite' extra). With --faults,
    URL must be postgresql:// and the soak runs on its own private cluster.
    """
    if faults is not None:
        if url is None or not url.startswith(("postgresql:", "postgres:")):
            raise click.UsageError(
                "--faults soaks PostgreSQL: give a postgresql:// URL"
            )
        if through_async:
            raise click.UsageError(
                "--faults runs the writers through the sync API only"
            )
        if faults == "failover":
            from rulvar_cli._failover import failover_soak

            failover_soak(
                replication_mode,
                profile_name,
                writers,
                seconds,
                seed,
                json_path,
                report_dir,
            )
        _fault_soak(faults, profile_name, writers, seconds, seed, json_path, report_dir)
        return
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
                through_async,
                report_dir,
            )
        return
    _soak(
        url,
        profile_name,
        writers,
        companions,
        seconds,
        seed,
        json_path,
        through_async,
        report_dir,
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
    through_async: bool,
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
    from rulvar_conformance.soak.runner import run_profile_soak

    profile = profile_named(profile_name)
    live = sys.stdout.isatty()

    def progress(elapsed: float, activity: SoakActivity) -> None:
        if live:
            click.echo(activity.progress_line(elapsed, profile.quorum), nl=False)

    n_writers = writers or profile.writers
    click.echo(
        f"soaking {parsed.redacted} ({backend.name}), profile {profile.name}: "
        f"{n_writers} writers, ttl {profile.ttl_ms} ms, cap {seconds or profile.seconds:g} s"
        + (", through the asyncio API" if through_async else "")
    )
    scratch, folder = _report_folder(report_dir)
    started = time.monotonic()
    try:
        with backend.certify(parsed) as certified:
            locations = certified
            if through_async:
                from rulvar_conformance.harness.async_certify import async_locations

                locations = async_locations(certified)
            location = locations()
            if _is_sqlite_memory(parsed.raw):
                click.echo(
                    "  sqlite://:memory: lives inside one process and writers are "
                    f"separate processes: soaking a temporary file instead ({location.name})"
                )
            try:
                result = run_profile_soak(
                    location,
                    profile,
                    writers=n_writers,
                    seconds=seconds,
                    seed=seed,
                    companions=companions,
                    report_dir=folder,
                    on_progress=progress,
                )
            finally:
                location.remove()
        wall_s = time.monotonic() - started
        if live:
            click.echo()
        _show(result.summary, wall_s, folder, json_path, report_dir)
    finally:
        if scratch is not None:
            scratch.cleanup()
    _verdict(result.summary)


def _report_folder(
    report_dir: str | None,
) -> tuple[tempfile.TemporaryDirectory[str] | None, str]:
    """The report folder: the one asked for, else a temporary one (and its handle)."""
    if report_dir:
        return None, report_dir
    scratch = tempfile.TemporaryDirectory(prefix="rulvar-soak-report-")
    return scratch, scratch.name


def _show(
    summary: SoakSummary,
    wall_s: float,
    folder: str,
    json_path: str | None,
    report_dir: str | None,
) -> None:
    """The rows, the JSON summary and where the report folder is."""
    from rulvar_conformance.soak.report import INSTALL_HINT

    drawn = (Path(folder) / "tenures.png").exists()
    for label, value in summary.rows(wall_s):
        click.echo(f"  {label:<34} {value}")
    if json_path:
        Path(json_path).write_text(
            json.dumps(summary.to_json(wall_s), indent=2) + "\n", encoding="utf-8"
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


def _verdict(summary: SoakSummary) -> NoReturn:
    for line in summary.verdict_lines():
        click.echo(line)
    sys.exit(_EXIT_OF[summary.outcome])


def _fault_soak(
    kind: str,
    profile_name: str,
    writers: int | None,
    seconds: float | None,
    seed: int | None,
    json_path: str | None,
    report_dir: str | None,
) -> None:
    """``--faults``: the soak on a private cluster under network or server faults."""
    import time

    from rulvar_conformance.faults.profiles import fault_profile
    from rulvar_conformance.faults.soak import run_fault_soak

    profile = fault_profile(kind, profile_name)
    click.echo(
        f"soaking a private PostgreSQL cluster (the server at the URL is not touched) "
        f"under {kind} faults, profile {profile.name}: {writers or profile.storm.writers} "
        f"writers, ttl {profile.storm.ttl_ms} ms, cap {seconds or profile.storm.seconds:g} s"
    )
    scratch, folder = _report_folder(report_dir)
    started = time.monotonic()
    try:
        try:
            result = run_fault_soak(
                profile, writers=writers, seconds=seconds, seed=seed, report_dir=folder
            )
        except ConfigError as exc:
            fail("config", str(exc), EXIT_USAGE)
        _show(result.summary, time.monotonic() - started, folder, json_path, report_dir)
    finally:
        if scratch is not None:
            scratch.cleanup()
    _verdict(result.summary)


def _is_sqlite_memory(raw: str) -> bool:
    """``sqlite://:memory:`` (any spelling the URL parser accepts for it)."""
    return raw.startswith("sqlite:") and ":memory:" in raw
