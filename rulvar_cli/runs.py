"""``rulvar runs``: list, show, audit and repair, delete and prune the runs of a store.

``list``, ``show`` and ``audit`` (without ``--repair``) never write: they open the
store read-only. ``audit --repair``, ``delete`` and ``prune`` write one run at a
time under a brief lease of their own (owner ``runs-audit-<pid>`` or
``runs-retention-<pid>``); a run leased by a live owner is skipped, never raced.

Exit codes: 0 done (nothing remains), 1 something remains (a divergence not
repaired, a run skipped or unreadable, an unknown run), 2 usage or
configuration, 3 the store did not answer within ``--timeout``.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import click

from rulvar_cli._common import (
    AUDIT_EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_USAGE,
    LIST_EXIT_CODES_HELP,
    RETENTION_EXIT_CODES_HELP,
    RUNS_EXIT_CODES_HELP,
    SHOW_EXIT_CODES_HELP,
    fail,
    plural,
)
from rulvar_cli._operator import (
    DEFAULT_TIMEOUT_S,
    Progress,
    Watchdog,
    open_for_operator,
    sanitize,
    store_did_not_answer,
)
from rulvar_cli._show import describe_run, print_run
from rulvar_cli._threads import resolve, shown_id
from rulvar_cli.runs_move import register as register_moves
from rulvar_store import OpenedStore, RunFilter
from rulvar_store.errors import StoreBusyError, StoreUnavailableError
from rulvar_store.ops import RunStateAudit, is_thread_meta

__all__ = ["runs_command"]

_JSON_HELP: Final = "Print JSON instead of text."


def _timeout_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--timeout",
        "timeout_s",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        metavar="SECONDS",
        help="Longest any one store call may wait (locks, busy file, connection).",
    )(function)


def _run_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--run",
        "runs",
        multiple=True,
        metavar="ID",
        help="A run by its run id, never read as a thread id (repeatable).",
    )(function)


def _thread_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--thread",
        "threads",
        multiple=True,
        metavar="ID",
        help="A LangGraph thread by the thread id it was invoked with (repeatable).",
    )(function)


def _named(
    given: tuple[str, ...],
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    *,
    one: bool = False,
) -> list[tuple[str | None, str]]:
    """``(kind, name)`` of every id given: positional (``None``: run or thread), --run, --thread."""
    wanted: list[tuple[str | None, str]] = [
        *((None, name) for name in given),
        *(("run", name) for name in runs),
        *(("thread", name) for name in threads),
    ]
    if not wanted:
        fail("usage", "Missing argument RUN (or --run ID / --thread ID)", EXIT_USAGE)
    if one and len(wanted) > 1:
        fail("usage", "name one RUN (or one --run ID / --thread ID)", EXIT_USAGE)
    return wanted


@contextmanager
def _store(
    url: str, *, write: bool, timeout_s: float
) -> Iterator[tuple[OpenedStore, Watchdog]]:
    """Open the store bounded; a store that does not answer ends the command (exit 3)."""
    watchdog = Watchdog(timeout_s)
    try:
        with open_for_operator(
            url, write=write, timeout_s=timeout_s, watchdog=watchdog
        ) as opened:
            yield opened, watchdog
    except (StoreBusyError, StoreUnavailableError) as exc:
        store_did_not_answer(exc, timeout_s)
    finally:
        watchdog.stop()


@click.group("runs", epilog=RUNS_EXIT_CODES_HELP)
def runs_command() -> None:
    """Inspect, audit and clean up the runs of a store (URL as for 'rulvar check')."""


# -- list -----------------------------------------------------------------------


@runs_command.command("list", epilog=LIST_EXIT_CODES_HELP)
@click.argument("url")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="S",
    help="Only runs with this status (repeatable: any of them).",
)
@click.option("--name", default=None, metavar="N", help="Only runs with this name.")
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="T",
    help="Only runs carrying this tag (repeatable: all of them).",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@_timeout_option
def list_command(
    url: str,
    statuses: tuple[str, ...],
    name: str | None,
    tags: tuple[str, ...],
    as_json: bool,
    timeout_s: float,
) -> None:
    """List the runs in URL's store with their status; never writes.

    A LangGraph thread is listed by its thread id, with the status its lease
    and checkpoints tell: running, interrupted, finished, failed, abandoned
    (its worker died holding it) or incomplete (written outside a hold).
    --status matches that status or the run status it stands for.
    """
    from rulvar_cli._threads import describe_thread, matches_status
    from rulvar_store.ops import iter_listed_runs

    # Statuses are matched here, not by the store: a thread's shown status is
    # derived from more than its meta.
    run_filter = RunFilter(name=name, tags=list(tags) if tags else None)
    shown = unreadable = 0
    # Every run is a line here: a counter only helps when the lines go elsewhere.
    progress = Progress(
        "listed", enabled=sys.stderr.isatty() and not sys.stdout.isatty()
    )
    with _store(url, write=False, timeout_s=timeout_s) as (opened, watchdog):
        listing = watchdog.pace(
            iter_listed_runs(opened.journal, run_filter), "listing runs"
        )
        # The first page is read before anything is printed: a missing schema or
        # database is then one error line, with no table header on stdout before it.
        first = list(itertools.islice(listing, 1))
        if as_json:
            click.echo('{"runs": [', nl=False)
        else:
            click.echo(f"{'RUN':<28} {'STATUS':<11} {'NAME':<20} UPDATED")
        for listed in itertools.chain(first, listing):
            meta = listed.meta or {}
            with watchdog.bound(f"reading run {listed.run_id!r}"):
                view = (
                    None
                    if listed.problem is not None
                    else describe_thread(opened, listed.run_id, meta)
                )
            if (
                statuses
                and listed.problem is None
                and not matches_status(statuses, meta, view)
            ):
                continue
            progress.step()
            status = meta.get("status") if view is None else view.status
            updated = meta.get("updatedAt") if view is None else view.updated_at
            if as_json:
                row = {
                    "runId": listed.run_id,
                    "threadId": None if view is None else view.thread_id,
                    "status": status,
                    "metaStatus": meta.get("status"),
                    "name": meta.get("name"),
                    "tags": meta.get("tags"),
                    "updatedAt": updated,
                    "thread": None if view is None else view.to_json(),
                    "problem": listed.problem,
                }
                click.echo(
                    ("" if shown == 0 else ", ") + json.dumps(row, ensure_ascii=False),
                    nl=False,
                )
            elif listed.problem is not None:
                click.echo(
                    f"{sanitize(listed.run_id):<28} unreadable: {sanitize(listed.problem)}"
                )
            else:
                click.echo(
                    f"{sanitize(shown_id(listed.run_id, meta)):<28} {sanitize(status):<11} "
                    f"{sanitize(meta.get('name') or '-'):<20} {sanitize(updated or '-')}"
                )
            shown += 1
            unreadable += listed.problem is not None
        progress.done()
    if as_json:
        click.echo(f'], "count": {shown}, "unreadable": {unreadable}}}')
    else:
        click.echo(
            plural(shown, "run") + (f", {unreadable} unreadable" if unreadable else ""),
            err=True,
        )
    if unreadable:
        sys.exit(EXIT_FAILED)


# -- show -----------------------------------------------------------------------


@runs_command.command("show", epilog=SHOW_EXIT_CODES_HELP)
@click.argument("url")
@click.argument("given", metavar="RUN", required=False)
@_run_option
@_thread_option
@click.option(
    "--tail",
    "tail_size",
    type=click.IntRange(0, 1000),
    default=5,
    show_default=True,
    help="Journal entries to show from the end.",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@_timeout_option
def show_command(
    url: str,
    given: str | None,
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    tail_size: int,
    as_json: bool,
    timeout_s: float,
) -> None:
    """Show one run: meta, lease, journal length and tail, settle, dangling, blobs.

    RUN is a run id or a LangGraph thread id ("user/42 ticket"); --run or
    --thread says which where one name could be both.
    """
    (wanted,) = _named((given,) if given else (), runs, threads, one=True)
    with _store(url, write=False, timeout_s=timeout_s) as (opened, watchdog):  # noqa: SIM117  # the bound needs the watchdog the first context makes
        with watchdog.bound(f"reading run {wanted[1]!r}"):
            named = resolve(opened, wanted[1], wanted[0])
            report = (
                None
                if named.run_id is None
                else describe_run(opened, named.run_id, tail_size)
            )
    if named.ambiguous:
        fail(
            "ambiguous",
            f"{sanitize(wanted[1])!r} {sanitize(named.problem)}",
            EXIT_USAGE,
        )
    if report is None:
        fail("no-such-run", sanitize(named.problem), EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print_run(report)
    if report["audit"]["verdict"] == "unreadable":
        sys.exit(EXIT_FAILED)


# -- audit ----------------------------------------------------------------------


@runs_command.command("audit", epilog=AUDIT_EXIT_CODES_HELP)
@click.argument("url")
@click.argument("given", metavar="[RUN]...", nargs=-1)
@_run_option
@_thread_option
@click.option(
    "--repair",
    is_flag=True,
    help="Rewrite meta-behind and stranded metas under a brief lease.",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@_timeout_option
def audit_command(
    url: str,
    given: tuple[str, ...],
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    repair: bool,
    as_json: bool,
    timeout_s: float,
) -> None:
    """Report every run whose meta disagrees with its journal; --repair fixes them.

    One line per non-consistent run: '<run> <verdict>: <reason>'. Without
    --repair nothing is written. With it, each repairable run is leased
    briefly (a live owner's run is skipped), re-audited and rewritten. Given
    RUNs (run or LangGraph thread ids), only those are audited.
    """
    from rulvar_cli._repair import repair_audit
    from rulvar_store.ops import audit_run, iter_run_audits

    wanted = _named(given, runs, threads) if given or runs or threads else []
    reported = remaining = repaired = 0
    rows: list[dict[str, Any]] = []
    progress = Progress("audited")
    with _store(url, write=repair, timeout_s=timeout_s) as (opened, watchdog):

        def chosen() -> Iterator[RunStateAudit]:
            nonlocal reported, remaining
            for kind, name in wanted:
                named = resolve(opened, name, kind)
                if named.run_id is None:
                    reported += 1
                    remaining += 1
                    click.echo(sanitize(named.problem), err=True)
                    continue
                yield audit_run(opened.journal, named.run_id)

        audits = watchdog.pace(
            chosen()
            if wanted
            else iter_run_audits(opened.journal, include_consistent=True),
            "auditing runs",
        )
        for audit in audits:
            progress.step()  # every run audited counts, not only the reported ones
            if audit.verdict == "consistent":
                continue
            reported += 1
            if repair and audit.repair_to is not None:
                with watchdog.bound(f"repairing run {audit.run_id!r}"):
                    outcome = repair_audit(opened.journal, audit)
            else:
                outcome = None
            left = outcome.remains if outcome is not None else True
            remaining += left
            repaired += outcome is not None and outcome.action == "repaired"
            suffix = "" if outcome is None else outcome.suffix
            if as_json:
                row = audit.to_json()
                row["threadId"] = (
                    audit.meta["threadId"] if is_thread_meta(audit.meta) else None
                )
                row["action"] = "reported" if outcome is None else outcome.action
                row["remains"] = left
                rows.append(row)
            else:
                progress.done()
                shown = shown_id(audit.run_id, audit.meta)
                click.echo(
                    f"{sanitize(shown)} {audit.verdict}: {sanitize(audit.reason)}{suffix}"
                )
        progress.done()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "runs": rows,
                    "reported": reported,
                    "repaired": repaired,
                    "remaining": remaining,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    if reported == 0:
        click.echo(
            "every run is consistent with its journal"
            if not wanted
            else f"{plural(len(wanted), 'run')} consistent with {'its' if len(wanted) == 1 else 'their'} journal",
            err=True,
        )
    elif remaining == 0:
        click.echo("every divergence repaired", err=True)
    else:
        click.echo(f"{remaining} of {reported} reported runs remain", err=True)
        sys.exit(EXIT_FAILED)


# -- delete and prune -----------------------------------------------------------


def _retention(
    url: str, wanted: list[tuple[str | None, str]], *, prune: bool, timeout_s: float
) -> None:
    from rulvar_store.ops import sweep_runs

    failed = 0
    with _store(url, write=True, timeout_s=timeout_s) as (opened, watchdog):
        for kind, given in wanted:
            with watchdog.bound(f"reading run {given!r}"):
                named = resolve(opened, given, kind)
            if named.run_id is None:
                what = {"run": "run", "thread": "LangGraph thread"}.get(
                    kind or "", "run or thread"
                )
                problem = named.problem if named.ambiguous else f"no such {what}"
                click.echo(f"{sanitize(given)}: {sanitize(problem)}", err=True)
                failed += 1
                continue
            run_id = named.run_id
            with watchdog.bound(f"{'pruning' if prune else 'deleting'} run {run_id!r}"):
                (outcome,) = sweep_runs(
                    opened.journal, opened.transcripts, [run_id], prune=prune
                )
            if outcome.outcome == "done":
                done = (
                    f"pruned {plural(outcome.done or 0, 'checkpoint')}"
                    if prune
                    else "deleted"
                )
                click.echo(f"{sanitize(given)}: {done}")
            else:
                failed += 1
                click.echo(
                    f"{sanitize(given)}: {outcome.outcome}, {sanitize(outcome.detail)}"
                )
    if failed:
        sys.exit(EXIT_FAILED)


@runs_command.command("delete", epilog=RETENTION_EXIT_CODES_HELP)
@click.argument("url")
@click.argument("run_ids", metavar="RUN...", nargs=-1)
@_run_option
@_thread_option
@_timeout_option
def delete_command(
    url: str,
    run_ids: tuple[str, ...],
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    timeout_s: float,
) -> None:
    """Delete runs: blobs first, then journal and meta, under a brief lease.

    RUN is a run id or a LangGraph thread id (a thread is deleted with every
    checkpoint). A run leased by a live owner is skipped. The epoch counter
    stays, so a worker of the deleted run can never write into a run
    recreated later.
    """
    wanted = _named(run_ids, runs, threads)
    _retention(url, wanted, prune=False, timeout_s=timeout_s)


@runs_command.command("prune", epilog=RETENTION_EXIT_CODES_HELP)
@click.argument("url")
@click.argument("run_ids", metavar="RUN...", nargs=-1)
@_run_option
@_thread_option
@_timeout_option
def prune_command(
    url: str,
    run_ids: tuple[str, ...],
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    timeout_s: float,
) -> None:
    """Delete checkpoints of finished agent attempts nothing refers to.

    RUN is a run id or a LangGraph thread id. A LangGraph thread's checkpoints
    are not agent attempts: none of them is pruned here (the saver's
    ``prune`` keeps a thread's newest checkpoints).
    """
    wanted = _named(run_ids, runs, threads)
    _retention(url, wanted, prune=True, timeout_s=timeout_s)


# copy, move, export, import: their own module (runs_move).
register_moves(runs_command)
