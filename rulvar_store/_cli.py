"""The ``rulvar`` command: parse, call the library, print. No logic of its own.

Exit codes: 0 success, 1 a check failed, 2 a usage or configuration mistake
(printed as one line, never a traceback).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rulvar_store._plugins import BackendInfo, list_backends, resolve_backend
from rulvar_store._urls import parse_store_url
from rulvar_store.errors import RulvarError

if TYPE_CHECKING:
    from rulvar_conformance.certify import CheckResult

__all__ = ["main"]

EXIT_FAILED = 1
EXIT_USAGE = 2


def _backend_row(info: BackendInfo) -> dict[str, Any]:
    backend = info.backend
    return {
        "name": backend.name,
        "schemes": list(backend.schemes),
        "capabilities": sorted(backend.capabilities),
        "distribution": info.distribution,
        "installed": info.installed,
        "extra": backend.extra,
        "description": backend.description,
    }


@click.group()
@click.version_option(package_name="rulvar-stores")
def cli() -> None:
    """Fenced run stores: list backends and certify stores with the conformance kit."""


@cli.command("stores")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stores_command(as_json: bool) -> None:
    """List installed store backends, their URL schemes and capabilities."""
    rows = [_backend_row(info) for info in list_backends()]
    if as_json:
        click.echo(json.dumps({"backends": rows}, indent=2))
        return
    click.echo(f"{'SCHEME':<14} {'CAPABILITIES':<52} DISTRIBUTION")
    for row in rows:
        schemes = ", ".join(f"{scheme}://" for scheme in row["schemes"])
        capabilities = ", ".join(row["capabilities"]) or "-"
        origin = row["distribution"] or "-"
        if not row["installed"]:
            origin += f"  (not usable: pip install 'rulvar-stores[{row['extra']}]')"
        click.echo(f"{schemes:<14} {capabilities:<52} {origin}")


def _default_check_url(scratch: Path) -> str:
    """The embedded SQLite default when usable, else the in-memory store."""
    usable = {info.backend.name for info in list_backends() if info.installed}
    if "sqlite" in usable:
        return f"sqlite:///{scratch / 'rulvar-check.db'}"
    return "memory://"


@contextmanager
def _scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rulvar-check-") as name:
        yield Path(name)


def _result_row(result: CheckResult) -> dict[str, Any]:
    return {
        "suite": result.suite,
        "check": result.check_id,
        "passed": result.passed,
        "duration_ms": round(result.duration_ms, 1),
        "error": result.error,
    }


@cli.command("check")
@click.argument("url", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def check_command(url: str | None, as_json: bool) -> None:
    """Certify the backend behind URL with the conformance kit.

    Each check runs against a fresh, isolated store next to URL's location (a new
    file, directory or schema), so certifying never touches existing runs.
    Without URL: a temporary SQLite file (the embedded default).
    """
    with _scratch_dir() as scratch:
        target = url if url is not None else _default_check_url(scratch)
        parsed = parse_store_url(target)
        backend = resolve_backend(parsed)
        if backend.certify is None:
            raise click.UsageError(
                f"backend {backend.name!r} cannot open fresh stores for certification"
            )
        # The kit is imported only here: listing backends must not pay for it.
        from rulvar_conformance.certify import certification_suites, run_suites

        def progress(result: CheckResult) -> None:
            if not as_json:
                mark = "PASS" if result.passed else "FAIL"
                click.echo(
                    f"  {mark}  {result.suite:<20} {result.check_id:<42} "
                    f"{result.duration_ms:>8.1f} ms"
                )
                if result.error:
                    click.echo(f"        {result.error}")

        if not as_json:
            click.echo(f"certifying {parsed.redacted} ({backend.name})")
        with backend.certify(parsed) as fresh:
            suites = certification_suites(
                fresh,
                backend.capabilities,
                expiry_ttl_ms=backend.certify_expiry_ttl_ms,
            )
            results = run_suites(suites, on_result=progress)

    failed = [result for result in results if not result.passed]
    if as_json:
        payload = {
            "url": parsed.redacted,
            "backend": backend.name,
            "passed": len(results) - len(failed),
            "failed": len(failed),
            "results": [_result_row(result) for result in results],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(
            f"{len(results) - len(failed)} passed, {len(failed)} failed "
            f"across {len(suites)} suites"
        )
    if failed:
        sys.exit(EXIT_FAILED)


def main(argv: list[str] | None = None) -> None:
    """Run the command; user mistakes become one line on stderr, never a traceback."""
    # Drivers log connection retries as warnings; the command reports failures itself.
    logging.basicConfig(level=logging.ERROR, format="rulvar: %(name)s: %(message)s")
    try:
        cli.main(args=argv, prog_name="rulvar", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USAGE)
    except RulvarError as exc:
        click.echo(f"rulvar: {exc.code}: {exc}", err=True)
        sys.exit(EXIT_USAGE)
