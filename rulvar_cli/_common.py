"""What every command group shares: exit codes, their help texts, errors, plurals."""

from __future__ import annotations

import json
import sys
from typing import Final, NoReturn

import click

from rulvar_store import list_backends

__all__ = [
    "AUDIT_EXIT_CODES_HELP",
    "CHECK_EXIT_CODES_HELP",
    "EXIT_CODES_HELP",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SOAK_QUORUM",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "LIST_EXIT_CODES_HELP",
    "RETENTION_EXIT_CODES_HELP",
    "RUNS_EXIT_CODES_HELP",
    "SHOW_EXIT_CODES_HELP",
    "SOAK_EXIT_CODES_HELP",
    "STORES_EXIT_CODES_HELP",
    "fail",
    "plural",
    "set_json_errors",
    "sqlite_installed",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
# Only the ``runs`` commands bound every store call by --timeout.
EXIT_UNAVAILABLE: Final = 3

_USAGE: Final = (
    "2 a usage or configuration mistake, a missing extra, or a store that cannot "
    "be opened (one line on stderr, never a traceback)"
)
_TIMEOUT: Final = "3 the store did not answer within --timeout"

EXIT_CODES_HELP: Final = (
    f"Exit status: 0 success; 1 a check failed or something remains (each command's "
    f"--help says which); {_USAGE}; {_TIMEOUT} (runs commands)."
)
STORES_EXIT_CODES_HELP: Final = f"Exit status: 0 listed; {_USAGE}."
CHECK_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 every check that ran passed; 1 a check failed (each one "
    f"named with its clauses); {_USAGE}."
)
LIST_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 every run listed; 1 a run's record is unreadable (each such "
    f"run named, the rest still listed); {_USAGE}; {_TIMEOUT}."
)
SHOW_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 shown; 1 no such run, or its records are unreadable; "
    f"{_USAGE}; {_TIMEOUT}."
)
AUDIT_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 nothing remains; 1 something remains (a divergence not "
    f"repaired, a run skipped or unreadable); {_USAGE}; {_TIMEOUT}."
)
RETENTION_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 every run done; 1 a run unknown, skipped (leased by a live "
    f"owner) or failed; {_USAGE}; {_TIMEOUT}."
)
# The group's own help: its subcommands each state theirs.
RUNS_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 done; 1 something remains (each subcommand's --help says "
    f"what); {_USAGE}; {_TIMEOUT}."
)
EXIT_SOAK_QUORUM: Final = 3
"""A soak that reached its cap before its quorum: no verdict, not a violation."""

SOAK_EXIT_CODES_HELP: Final = (
    f"Exit status: 0 no violation; 1 the soak found violations (grouped by kind "
    f"and surface); {_USAGE}; 3 the quorum was not reached before the cap (no "
    f"violation seen, but too little done to judge: give it more --seconds)."
)

# Set once per invocation by ``main``: under --json, errors are JSON on stdout too.
_json_errors = False


def set_json_errors(enabled: bool) -> None:
    """Make ``fail`` also print a JSON error object on stdout (``--json`` given)."""
    global _json_errors
    _json_errors = enabled


def fail(code: str, message: str, exit_code: int) -> NoReturn:
    """End the command: one line on stderr and, under --json, a JSON error on stdout.

    A script reading stdout under --json then always gets a JSON document, never
    an empty stream it cannot tell from a crash.
    """
    if _json_errors:
        error = {"code": code, "message": message, "exit": exit_code}
        click.echo(json.dumps({"error": error}, ensure_ascii=False))
    click.echo(f"rulvar: {code}: {message}", err=True)
    sys.exit(exit_code)


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 run``, ``2 runs``: a count with its noun in the right number."""
    noun = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {noun}"


def sqlite_installed() -> bool:
    """Whether the embedded default, the SQLite backend, can be used here."""
    return any(
        info.backend.name == "sqlite" and info.installed for info in list_backends()
    )
