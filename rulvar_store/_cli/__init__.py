"""The ``rulvar`` command: parse, call the library, print. No logic of its own.

One module per command group; each imports its heavy parts (the kit, drivers)
only when it runs, so ``rulvar --help`` and ``rulvar stores`` stay fast.

Exit codes: 0 success, 1 a check failed, 2 a usage or configuration mistake
(printed as one line, never a traceback).
"""

from __future__ import annotations

import logging
import sys

import click

from rulvar_store._cli._common import EXIT_FAILED, EXIT_USAGE
from rulvar_store._cli.check import check_command
from rulvar_store._cli.soak import soak_command
from rulvar_store._cli.stores import stores_command
from rulvar_store.errors import RulvarError

__all__ = ["cli", "main"]


@click.group()
@click.version_option(package_name="rulvar-stores")
def cli() -> None:
    """Fenced run stores: list backends and certify stores with the conformance kit."""


cli.add_command(stores_command)
cli.add_command(check_command)
cli.add_command(soak_command)


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
