"""``rulvar runs copy|move|export|import``: runs between stores, epochs carried (V1-V10).

Each run is copied under a mover's lease at both ends (``rulvar_store.ops.copy_run``);
``move`` verifies the copy, then leaves a tombstone at the source that refuses
every later acquire there with ``RunMovedError`` naming the destination. A run
under a live lease is skipped (exit 1) unless ``--wait``. The same command run
again after a kill finishes the job: what already arrived is kept, not written
twice.

Output: one row per run (``RUN ACTION DETAIL``); on a terminal a progress bar
(the ``progress`` extra, ``rich``) instead of nothing while a run copies;
``--json`` prints one JSON document. Exit codes as the other ``runs`` commands:
0 done, 1 a run skipped or failed, 2 usage or configuration, 3 a store did not
answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

import click

from rulvar_cli._common import EXIT_FAILED, EXIT_USAGE, fail
from rulvar_cli._operator import _options, sanitize, store_did_not_answer
from rulvar_cli.runs_orphans import add_orphans_option
from rulvar_store import OpenedStore, RunFilter, open_store
from rulvar_store.backend import option_int, parse_store_url
from rulvar_store.errors import StoreBusyError, StoreUnavailableError
from rulvar_store.ops import MOVER_TTL_MS, CopyOutcome

__all__ = ["register"]

MOVE_EXIT_CODES_HELP: Final = (
    "Exit status: 0 every run done (copied, moved, or moved before to this "
    "destination); 1 a run skipped (leased by a live owner, or moved elsewhere) or "
    "failed (a different run under that id at the destination, a failed "
    "verification); 2 a usage or configuration mistake, a store that cannot be "
    "opened, a damaged archive; 3 a store did not answer within --timeout."
)
_DEFAULT_WAIT_S: Final = 600.0


@contextmanager
def _opened(
    url: str, *, create: bool, timeout_s: float, relaxed: bool = False
) -> Iterator[OpenedStore]:
    """Open ``url`` for copies: bounded calls, the mover's short lease ttl.

    A source must already hold a store (``create`` False: probed read-only
    first, so a mistyped path is an error, not a new empty database); a
    destination is created when missing.
    """
    parsed = parse_store_url(url)
    if not create and parsed.scheme != "memory":
        probe = _options(
            parsed.scheme, dict(parsed.options), write=False, timeout_s=timeout_s
        )
        with open_store(url, **probe) as opened:
            opened.journal.list_runs(
                RunFilter(name="rulvar: probe, no run has this name")
            )
    options = _options(
        parsed.scheme, dict(parsed.options), write=True, timeout_s=timeout_s
    )
    if relaxed and parsed.scheme == "sqlite" and "synchronous" not in parsed.options:
        # A copy's source commits only the mover's own lease rows: one lost in a
        # power cut loses no record, and the destination's counter is already
        # above it. A move's tombstone is another matter: it stays at FULL.
        options["synchronous"] = "NORMAL"
    if "ttl_ms" in options:  # the SQL stores: a killed mover frees runs soon
        # A ttl in the URL wins (tests shorten it); else the mover's own.
        options["ttl_ms"] = option_int(parsed.options, "ttl_ms", MOVER_TTL_MS)
    opened = open_store(url, **options)
    try:
        yield opened
    finally:
        opened.close()


def _bounded(body: Callable[[], None], timeout_s: float) -> None:
    try:
        body()
    except (StoreBusyError, StoreUnavailableError) as exc:
        store_did_not_answer(exc, timeout_s)


def _run_ids(
    source: OpenedStore,
    runs: tuple[str, ...],
    threads: tuple[str, ...],
    every: bool,
    run_filter: RunFilter | None,
) -> Iterator[str]:
    if threads:
        from rulvar_store.ops import run_for_thread

        yield from (run_for_thread(thread) for thread in threads)
    yield from runs
    if every:
        from rulvar_store.ops import iter_listed_runs

        for listed in iter_listed_runs(source.journal, run_filter):
            yield listed.run_id


def _progress(enabled: bool, label: str) -> AbstractContextManager[Any]:
    """A rich progress bar on a terminal when the ``progress`` extra is installed."""
    if not enabled:
        return nullcontext(None)
    try:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    except ModuleNotFoundError:
        return nullcontext(None)
    return Progress(
        SpinnerColumn(),
        TextColumn(label + " {task.completed} runs: {task.description}"),
        TimeElapsedColumn(),
        transient=True,
    )


class _Report:
    """Rows as they come (text), or one JSON document at the end (``--json``)."""

    def __init__(self, as_json: bool, verb: str) -> None:
        self.as_json = as_json
        self.verb = verb
        self.rows: list[dict[str, Any]] = []
        self.remaining = 0
        self.count = 0
        self.bar: Any = None
        self.task: Any = None

    def add(self, outcome: CopyOutcome) -> None:
        self.count += 1
        self.remaining += outcome.remains
        if self.as_json:
            self.rows.append(outcome.to_json())
        else:
            line = f"{sanitize(outcome.run_id)} {outcome.action}: {sanitize(outcome.detail)}"
            if self.bar is not None:
                self.bar.console.print(line, markup=False, highlight=False)
            else:
                click.echo(line)
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=sanitize(outcome.run_id))

    def finish(self, extra: dict[str, Any] | None = None) -> None:
        if self.as_json:
            document = {
                "runs": self.rows,
                "count": self.count,
                "remaining": self.remaining,
            }
            click.echo(
                json.dumps({**document, **(extra or {})}, indent=2, ensure_ascii=False)
            )
        noun = "run" if self.count == 1 else "runs"
        if self.remaining:
            click.echo(
                f"{self.count} {noun} {self.verb}, {self.remaining} remain", err=True
            )
            sys.exit(EXIT_FAILED)
        click.echo(f"{self.count} {noun} {self.verb}", err=True)

    def follow(self, outcomes: Iterable[CopyOutcome]) -> None:
        show = not self.as_json and sys.stderr.isatty()
        with _progress(show, self.verb) as bar:
            if bar is not None:
                self.bar, self.task = bar, bar.add_task("", total=None)
            for outcome in outcomes:
                self.add(outcome)
            self.bar = None


def _selection(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--run",
            "runs",
            multiple=True,
            metavar="ID",
            help="A run to take (repeatable).",
        ),
        click.option(
            "--thread",
            "threads",
            multiple=True,
            metavar="ID",
            help="A LangGraph thread to take (repeatable; its run id is derived).",
        ),
        click.option(
            "--all",
            "every",
            is_flag=True,
            help="Every run with a meta (narrowed by the filters).",
        ),
        click.option(
            "--status",
            "statuses",
            multiple=True,
            metavar="S",
            help="With --all: only this status (repeatable).",
        ),
        click.option(
            "--name",
            default=None,
            metavar="N",
            help="With --all: only runs with this name.",
        ),
        click.option(
            "--tag",
            "tags",
            multiple=True,
            metavar="T",
            help="With --all: only runs with this tag (repeatable).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _common(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--wait",
            is_flag=True,
            help="Wait for runs under a live lease instead of skipping them.",
        ),
        click.option(
            "--wait-timeout",
            type=float,
            default=_DEFAULT_WAIT_S,
            show_default=True,
            metavar="SECONDS",
            help="With --wait: the longest wait for one run.",
        ),
        click.option(
            "--dry-run", is_flag=True, help="Say what would be copied; write nothing."
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Print JSON instead of text."
        ),
        click.option(
            "--timeout",
            "timeout_s",
            type=float,
            default=10.0,
            show_default=True,
            metavar="SECONDS",
            help="Longest any one store call may wait (locks, busy file, connection).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _filter(
    statuses: tuple[str, ...], name: str | None, tags: tuple[str, ...]
) -> RunFilter | None:
    if not (statuses or name or tags):
        return None
    return RunFilter(
        statuses=list(statuses) or None, name=name, tags=list(tags) or None
    )


def _check_selection(
    runs: tuple[str, ...], threads: tuple[str, ...], every: bool, filtered: bool
) -> None:
    if not (runs or threads or every):
        fail("usage", "name runs with --run/--thread, or take --all", EXIT_USAGE)
    if filtered and not every:
        fail("usage", "--status, --name and --tag narrow --all only", EXIT_USAGE)


def _dry_run(source: OpenedStore, run_ids: Iterable[str]) -> Iterator[CopyOutcome]:
    from rulvar_store.ops import RunReader, has_lease_peek

    for run_id in run_ids:
        reader = RunReader(source, run_id)
        entries, blobs = reader.entry_count(), len(reader.refs())
        state = (
            source.journal.peek_lease(run_id)
            if has_lease_peek(source.journal)
            else None
        )
        held = (
            f"; leased by {state.owner!r} now (would be skipped)"
            if state and state.live
            else ""
        )
        yield CopyOutcome(
            run_id,
            "dry-run",
            entries,
            blobs,
            detail=f"would copy {entries} entries, {blobs} blobs{held}",
        )


def _copy_command(move: bool) -> Callable[..., None]:
    def command(
        src_url: str,
        dst_url: str,
        runs: tuple[str, ...],
        threads: tuple[str, ...],
        every: bool,
        statuses: tuple[str, ...],
        name: str | None,
        tags: tuple[str, ...],
        verify: bool,
        wait: bool,
        wait_timeout: float,
        dry_run: bool,
        as_json: bool,
        timeout_s: float,
    ) -> None:
        from rulvar_store.ops import check_movable, copy_runs

        run_filter = _filter(statuses, name, tags)
        _check_selection(runs, threads, every, run_filter is not None)
        destination_name = parse_store_url(dst_url).redacted
        report = _Report(as_json, "moved" if move else "copied")

        def body() -> None:
            with _opened(
                src_url, create=False, timeout_s=timeout_s, relaxed=not move
            ) as source:
                if move:
                    check_movable(source)
                run_ids = _run_ids(source, runs, threads, every, run_filter)
                if dry_run:
                    report.follow(_dry_run(source, run_ids))
                    return
                with _opened(dst_url, create=True, timeout_s=timeout_s) as destination:
                    report.follow(
                        copy_runs(
                            source,
                            destination,
                            run_ids,
                            move=move,
                            destination_name=destination_name,
                            wait_s=wait_timeout if wait else 0.0,
                            verify=verify,
                        )
                    )

        _bounded(body, timeout_s)
        report.finish()

    return command


def _copy_like(group: click.Group, name: str, move: bool, doc: str) -> None:
    function = _copy_command(move)
    function.__doc__ = doc
    function = _common(function)
    if not move:
        function = click.option(
            "--verify",
            is_flag=True,
            help="Compare each run at both ends after copying it.",
        )(function)
    else:
        function = click.option(
            "--verify", is_flag=True, hidden=True, help="Always on for move."
        )(function)
    function = _selection(function)
    function = click.argument("dst_url", metavar="DST_URL")(function)
    function = click.argument("src_url", metavar="SRC_URL")(function)
    group.command(name, epilog=MOVE_EXIT_CODES_HELP)(function)


def register(group: click.Group) -> None:
    """Add ``copy``, ``move``, ``export``, ``import`` and ``list --orphans`` to ``runs``."""
    _copy_like(
        group,
        "copy",
        False,
        """Copy runs from SRC_URL's store to DST_URL's: journal, meta, blobs, epochs.

        Records arrive as stored; the destination's epoch counter ends above the
        source's. Run it again after an interruption: it finishes the job.
        """,
    )
    _copy_like(
        group,
        "move",
        True,
        """Move runs: copy, verify, then fence the source with a tombstone.

        At the source the run keeps its records but no owner can write again, and
        acquiring it raises RunMovedError naming DST_URL (without password).
        """,
    )
    group.command("export", epilog=MOVE_EXIT_CODES_HELP)(_export_command())
    group.command("import", epilog=MOVE_EXIT_CODES_HELP)(_import_command())
    add_orphans_option(group)


def _export_command() -> Callable[..., None]:
    @click.argument("url")
    @click.argument("file", type=click.Path(dir_okay=False))
    @_selection
    @_common
    def export_command(
        url: str,
        file: str,
        runs: tuple[str, ...],
        threads: tuple[str, ...],
        every: bool,
        statuses: tuple[str, ...],
        name: str | None,
        tags: tuple[str, ...],
        wait: bool,
        wait_timeout: float,
        dry_run: bool,
        as_json: bool,
        timeout_s: float,
    ) -> None:
        """Write runs of URL's store to FILE, a portable archive (.gz: compressed).

        One JSON line per record with a checksum per run; see
        docs/guides/moving-runs.md for the format.
        """
        from rulvar_store.ops import export_runs

        run_filter = _filter(statuses, name, tags)
        _check_selection(runs, threads, every, run_filter is not None)
        report = _Report(as_json, "exported")

        def body() -> None:
            with _opened(
                url, create=False, timeout_s=timeout_s, relaxed=True
            ) as source:
                run_ids = _run_ids(source, runs, threads, every, run_filter)
                if dry_run:
                    report.follow(_dry_run(source, run_ids))
                    return
                report.follow(
                    export_runs(
                        source,
                        run_ids,
                        file,
                        source_name=parse_store_url(url).redacted,
                        wait_s=wait_timeout if wait else 0.0,
                    )
                )

        _bounded(body, timeout_s)
        report.finish({"file": file})

    return export_command


def _import_command() -> Callable[..., None]:
    @click.argument("file", type=click.Path(dir_okay=False, exists=True))
    @click.argument("url")
    @_common
    def import_command(
        file: str,
        url: str,
        wait: bool,
        wait_timeout: float,
        dry_run: bool,
        as_json: bool,
        timeout_s: float,
    ) -> None:
        """Write every run of the archive FILE into URL's store (created if missing).

        The whole file is checked first (format version, every run's checksum):
        a damaged archive imports nothing. Run it again after an interruption.
        """
        from rulvar_store.ops import import_archive, scan_archive

        report = _Report(as_json, "imported")

        def body() -> None:
            if dry_run:
                report.follow(
                    CopyOutcome(
                        run_id,
                        "dry-run",
                        entries,
                        blobs,
                        detail=f"would import {entries} entries, {blobs} blobs",
                    )
                    for run_id, entries, blobs in scan_archive(file)
                )
                return
            with _opened(url, create=True, timeout_s=timeout_s) as destination:
                report.follow(
                    import_archive(
                        file, destination, wait_s=wait_timeout if wait else 0.0
                    )
                )

        _bounded(body, timeout_s)
        report.finish({"file": file})

    return import_command
