"""``rulvar check``: certify the backend behind a URL with the conformance kit."""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rulvar_cli._common import (
    CHECK_EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_USAGE,
    fail,
    plural,
    sqlite_installed,
)
from rulvar_store.backend import (
    Backend,
    LocationFactory,
    StoreUrl,
    parse_store_url,
    resolve_backend,
)
from rulvar_store.errors import RulvarError
from rulvar_store.ops import process_stats, stats_since

if TYPE_CHECKING:
    from rulvar_conformance import ConformanceSuite
    from rulvar_conformance.harness.certify import CheckResult

__all__ = ["check_command"]

_MARKS = {"passed": "PASS", "failed": "FAIL", "not-run": "NOT RUN"}


def _default_check_url(scratch: Path) -> str:
    """The embedded SQLite default when usable, else the in-memory store (said why)."""
    if sqlite_installed():
        return f"sqlite:///{scratch / 'rulvar-check.db'}"
    # Said on stderr so --json output stays one document.
    click.echo(
        "rulvar: no URL and SQLite is not installed (the 'sqlite' extra, apsw), "
        "so this certifies memory://, the reference store; give a URL to "
        "certify your own",
        err=True,
    )
    return "memory://"


def enter_certify(
    backend: Backend, parsed: StoreUrl, stack: ExitStack
) -> LocationFactory:
    """Enter the plugin's ``certify``; a bug in it is the plugin's, exit 2, not a failed check.

    A typed ``RulvarError`` (a bad URL, a server that does not answer) goes on to
    the usual one-line report; anything else raised while the plugin sets up its
    fresh locations names the backend and the exception, never a traceback.
    """
    assert backend.certify is not None  # the caller checked
    try:
        return stack.enter_context(backend.certify(parsed))
    except RulvarError:
        raise
    except Exception as exc:
        fail(
            "plugin",
            f"backend {backend.name!r} failed in its own certify(), before any "
            f"check ran: {type(exc).__name__}: {exc} (a bug in the plugin, not "
            "in the store under test)",
            EXIT_USAGE,
        )


def _announce(suite: str, check_id: str, *, live: bool) -> None:
    """Name the check about to run, on a terminal only, overwritten by its row.

    Piped or logged output gets no line per check (a default run has hundreds):
    there the running check is named by the stack ``faulthandler`` prints on a
    fatal signal, whose frame ``_named_runner`` gives the check's name.
    """
    if live and sys.stdout.isatty():
        click.echo(f"  RUN      {suite:<20} {check_id}\r", nl=False)


def _call(run: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    return run()


def _named_runner(
    suite: str, check_id: str
) -> Callable[[Callable[[], list[CheckResult]]], list[CheckResult]]:
    """``_call`` under the name ``running SUITE CHECK``, as a crash's stack shows it.

    A store that kills the process (a segfault in a driver) leaves the Python
    stack of every thread on stderr; the frame of this function then reads
    ``in running journal meta-separation``, naming the check it was in.
    """
    code = _call.__code__.replace(co_name=f"running {suite} {check_id}")
    runner: Callable[[Callable[[], list[CheckResult]]], list[CheckResult]]
    runner = types.FunctionType(code, globals(), code.co_name)
    return runner


def _run_attributed(
    suites: list[ConformanceSuite],
    progress: Callable[[CheckResult], None],
    *,
    live: bool,
    check_timeout_s: float,
    run_timeout_s: float,
) -> list[CheckResult]:
    """Run the checks one at a time, each named while it runs (``_announce``).

    ``faulthandler`` prints the Python stack on a fatal signal (a segfault in a
    driver): it shows the check's code and, through ``_named_runner``, its name.
    One ``RunBudget`` bounds them all (K10): after a hang each check gets less
    time, and past ``run_timeout_s`` none starts.
    """
    import faulthandler
    import io

    from rulvar_conformance.harness.certify import RunBudget, run_suites

    budget = RunBudget(check_timeout_s, run_timeout_s)

    try:
        faulthandler.enable()
    except (io.UnsupportedOperation, ValueError):
        # A stderr without a file descriptor (a caller's captured stream): the
        # process's own stderr still gets the stack of a fatal signal.
        if sys.__stderr__ is not None:
            faulthandler.enable(file=sys.__stderr__)
    results: list[CheckResult] = []
    for suite in suites:
        for one in suite.checks:
            _announce(suite.name, one.id, live=live)
            results += _named_runner(suite.name, one.id)(
                functools.partial(
                    run_suites,
                    [replace(suite, checks=(one,))],
                    on_result=progress,
                    budget=budget,
                )
            )
    return results


class _CheckCommand(click.Command):
    """``rulvar check``: its --help lists the suite names, read from the kit then.

    The kit is imported only when that help is asked for, so other commands and
    plain ``rulvar --help`` never pay for it.
    """

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from rulvar_conformance.harness.certify import suite_specs

        rows = [
            (
                spec.name,
                spec.description
                + ("" if spec.default else " (not default)")
                + ("" if spec.capability is None else f" [needs {spec.capability}]"),
            )
            for spec in suite_specs()
        ]
        with formatter.section("Suites (--suite NAME; 'all' for every one)"):
            formatter.write_dl(rows)
        super().format_epilog(ctx, formatter)


@contextmanager
def _scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rulvar-check-") as name:
        yield Path(name)


def _clause_texts(result: CheckResult) -> list[dict[str, str]]:
    """Each clause the check cites, with its one-line text from the catalogue."""
    from rulvar_conformance.harness.explain import clause_texts

    return clause_texts(result.clauses)


def _detail(result: CheckResult) -> str | None:
    """A failure's text without the ``store-conformance <id>:`` prefix the row shows."""
    from rulvar_conformance.harness.explain import failure_detail

    return (
        None if result.error is None else failure_detail(result.check_id, result.error)
    )


def _result_row(result: CheckResult) -> dict[str, Any]:
    failed = result.status == "failed"
    return {
        "suite": result.suite,
        "check": result.check_id,
        "title": result.title,
        "status": result.status,
        "passed": result.passed,
        "duration_ms": round(result.duration_ms, 1),
        "clauses": _clause_texts(result),
        "error": result.error if failed else None,
        "detail": _detail(result) if failed else None,
        "reason": result.error if result.status == "not-run" else None,
        "note": result.note,
    }


def _explain(result: CheckResult) -> list[str]:
    """The lines under a table row: what failed and why, or why it did not run."""
    said = [] if result.note is None else [f"        did: {result.note}"]
    if result.status == "not-run":
        return [f"        reason: {result.error}"]
    if result.status != "failed":
        return said
    from rulvar_conformance.harness.explain import explain_failure

    explained = explain_failure(
        result.title, result.clauses, _detail(result) or "", indent="        "
    )
    return [*explained, *said]


@click.command("check", cls=_CheckCommand, epilog=CHECK_EXIT_CODES_HELP)
@click.argument("url", required=False)
@click.option(
    "--suite",
    "suites_wanted",
    multiple=True,
    metavar="NAME",
    help="Run this suite (repeatable; 'all' for every suite). Default: the default suites.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--async",
    "async_too",
    is_flag=True,
    help="Also certify the asyncio path (automatic for a backend with a native "
    "async opener): the suites again through open_store_async, plus cancellation.",
)
@click.option(
    "--check-timeout",
    "check_timeout_s",
    type=click.FloatRange(min=0.1),
    default=180.0,  # DEFAULT_CHECK_TIMEOUT_S: the kit is imported only when run
    show_default=True,
    metavar="S",
    help="Fail a check that has not finished after S seconds (with the stuck "
    "threads' stacks) and go on to the next.",
)
@click.option(
    "--run-timeout",
    "run_timeout_s",
    type=click.FloatRange(min=1.0),
    default=3600.0,  # DEFAULT_RUN_TIMEOUT_S: the kit is imported only when run
    show_default=True,
    metavar="S",
    help="Bound the whole run: checks not started after S seconds fail as not "
    "started. Once a check has hung, each later one gets 30 s at most.",
)
@click.option(
    "--isolate",
    is_flag=True,
    help="Run each check in a child process of its own: a check whose store "
    "crashes the process (a segfault) fails with the signal, and the rest run.",
)
def check_command(
    url: str | None,
    suites_wanted: tuple[str, ...],
    as_json: bool,
    async_too: bool,
    check_timeout_s: float,
    run_timeout_s: float,
    isolate: bool,
) -> None:
    """Certify the backend behind URL with the conformance kit.

    Each check runs against a fresh, isolated location next to URL's (a new
    file, directory or schema), so certifying never touches existing runs.
    Without URL: a temporary SQLite file (the embedded default) when the
    'sqlite' extra is installed, else memory:// (stderr says so). A backend
    with a native async opener is certified through it too (suites marked
    "(async)"), as is any backend with --async.
    """
    stuck_before: list[object] = []
    with _scratch_dir() as scratch:
        target = url if url is not None else _default_check_url(scratch)
        parsed = parse_store_url(target)
        backend = resolve_backend(parsed)
        if backend.certify is None:
            raise click.UsageError(
                f"backend {backend.name!r} cannot open fresh stores for certification"
            )
        # The kit is imported only here: listing backends must not pay for it.
        from rulvar_conformance.harness.certification import by_url
        from rulvar_conformance.harness.certify import (
            certification_suites,
            named_but_not_declared,
            stuck_threads,
        )

        stuck_before.extend(stuck_threads())
        counted_before = process_stats()

        def progress(result: CheckResult) -> None:
            if not as_json:
                click.echo(
                    f"  {_MARKS[result.status]:<7}  {result.suite:<20} "
                    f"{result.check_id:<42} {result.duration_ms:>8.1f} ms"
                )
                for line in _explain(result):
                    click.echo(line)

        # certify() validates the URL first: a mistake is one line, nothing else.
        with ExitStack() as stack:
            locations = enter_certify(backend, parsed, stack)
            certification = by_url(locations, parsed, backend)
            try:
                suites = certification_suites(certification, suites_wanted or None)
            except KeyError as exc:
                raise click.UsageError(str(exc.args[0])) from exc
            # Only once the selection is known good: a usage error comes alone.
            left_out = named_but_not_declared(certification, suites_wanted)
            if not as_json:
                click.echo(f"certifying {parsed.redacted} ({backend.name})")
                for name, capability in left_out:
                    click.echo(
                        f"  left out: {name} checks the {capability!r} capability, "
                        f"which {backend.name} stores do not declare"
                    )
            from rulvar_cli._durability import durability_line, durability_of

            durability = durability_of(locations)  # P20: async, sync or quorum
            if durability is not None and not as_json:
                click.echo(durability_line(durability))
            async_path = async_too or backend.open_async is not None
            if async_path:
                from rulvar_conformance.harness.async_certify import async_suites

                suites += async_suites(certification, suites_wanted or None)
            if isolate:
                from rulvar_conformance.harness.certify import RunBudget
                from rulvar_conformance.harness.isolation import run_isolated

                results = run_isolated(
                    target,
                    suites,
                    selection=suites_wanted or None,
                    async_path=async_path,
                    check_timeout_s=check_timeout_s,
                    on_result=progress,
                    budget=RunBudget(check_timeout_s, run_timeout_s),
                )
            else:
                results = _run_attributed(
                    suites,
                    progress,
                    live=not as_json,
                    check_timeout_s=check_timeout_s,
                    run_timeout_s=run_timeout_s,
                )

    failed = [result for result in results if result.status == "failed"]
    not_run = [result for result in results if result.status == "not-run"]
    passed = len(results) - len(failed) - len(not_run)
    if as_json:
        payload = {
            "url": parsed.redacted,
            "backend": backend.name,
            "passed": passed,
            "failed": len(failed),
            "not_run": len(not_run),
            "durability": durability,
            "left_out": [
                {"suite": name, "capability": capability}
                for name, capability in left_out
            ],
            "results": [_result_row(result) for result in results],
            # What the checks' stores counted in this process (--isolate: none).
            "store_stats": stats_since(counted_before, process_stats()),
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(
            f"{passed} passed, {len(failed)} failed, {len(not_run)} not run "
            f"across {plural(len(suites), 'suite')}"
        )
    code = EXIT_FAILED if failed else 0
    # Only threads this command's checks left behind (a test process may hold older).
    stuck = len([thread for thread in stuck_threads() if thread not in stuck_before])
    if stuck:
        # A timed-out check's thread may hold locks that interpreter shutdown
        # would wait on forever: the report is out, so leave without waiting.
        click.echo(
            f"{stuck} timed-out {'check' if stuck == 1 else 'checks'} left threads "
            "running: exiting without waiting for them",
            err=True,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if failed:
        sys.exit(EXIT_FAILED)
