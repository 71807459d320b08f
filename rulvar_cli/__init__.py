"""The ``rulvar`` command: parse, call the library, print. No logic of its own.

One module per command group; each imports its heavy parts (the kit, drivers)
only when it runs, so ``rulvar --help`` and ``rulvar stores`` stay fast.

Exit codes: 0 success, 1 a check failed or something remains, 2 a usage or
configuration mistake, a missing extra, or a store that cannot be opened (one
line, never a traceback), 3 a ``runs`` command's store did not answer in time;
every command's ``--help`` states its own. Nothing below this package imports it.
"""

from __future__ import annotations

import logging
import sys

import click

from rulvar_cli._common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_USAGE,
    fail,
    set_json_errors,
)
from rulvar_cli.check import check_command
from rulvar_cli.runs import runs_command
from rulvar_cli.soak import soak_command
from rulvar_cli.stores import stores_command
from rulvar_store.errors import RulvarError

__all__ = ["cli", "main"]


@click.group(epilog=EXIT_CODES_HELP)
@click.version_option(package_name="rulvar-stores")
def cli() -> None:
    """Fenced run stores: list backends, certify and soak stores, operate on runs."""


cli.add_command(stores_command)
cli.add_command(check_command)
cli.add_command(runs_command)
cli.add_command(soak_command)


def _document_exit_codes(group: click.Group) -> None:
    """Every command's --help ends with exit codes, whoever registered it.

    A command that documents its own keeps them; subcommands of a group inherit
    the group's.
    """
    for command in group.commands.values():
        if not command.epilog:
            command.epilog = group.epilog or EXIT_CODES_HELP
        if isinstance(command, click.Group):
            _document_exit_codes(command)


def _wants_json(args: list[str]) -> bool:
    """``--json`` as a flag: every command but ``soak``, whose --json names a file."""
    words = [arg for arg in args if not arg.startswith("-")]
    return "--json" in args and (not words or words[0] != "soak")


def main(argv: list[str] | None = None) -> None:
    """Run the command; user mistakes become one line on stderr, never a traceback."""
    # Drivers log connection retries as warnings; the command reports failures itself.
    logging.basicConfig(level=logging.ERROR, format="rulvar: %(name)s: %(message)s")
    # psycopg.pool logs each failed connect at ERROR, then the store raises a typed
    # error that the command prints as its one line: the log lines only repeat it.
    logging.getLogger("psycopg").setLevel(logging.CRITICAL)
    _document_exit_codes(cli)
    args = sys.argv[1:] if argv is None else argv
    set_json_errors(_wants_json(args))
    try:
        cli.main(args=args, prog_name="rulvar", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILED)
    except click.exceptions.UsageError as exc:
        if _wants_json(args):
            fail("usage", exc.format_message(), EXIT_USAGE)
        exc.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        fail("usage", exc.format_message(), EXIT_USAGE)
    except RulvarError as exc:
        fail(exc.code, str(exc), EXIT_USAGE)
    except ModuleNotFoundError as exc:
        # An optional driver or tool the install lacks: say what, never a
        # traceback. A module of this project missing is a broken install.
        fail(
            "missing-module",
            f"{exc}; this command needs it: install the extra that provides it "
            "(see 'rulvar stores' and docs/getting-started.md)",
            EXIT_USAGE,
        )
    except OSError as exc:
        # A path the command could not use; backends translate their own, this
        # is the net under any that slip through.
        fail("error", str(exc), EXIT_USAGE)
