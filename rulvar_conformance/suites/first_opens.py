"""``first_opens_conformance(certification)``: boot under concurrent first opens.

A store builds its format the first time a location is opened (SQLite's WAL
switch and tables, PostgreSQL's schema, the file store's folders). Every other
check opens a location once before anything races, so a bootstrap that checks
for its tables and then creates them, or does not retry a busy file, passes
them all. ``boot-concurrent-first-opens`` starts ``PROCESSES`` children over
ONE fresh location, releases them together, and requires every one to open,
read and close cleanly (the soak's boot storm, S11, run as a check). A location
that cannot be opened in a child process does not run it.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.soak.boot_storm import run_boot_storm
from rulvar_store import ConfigError
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "first_opens_conformance"]

PROCESSES: Final = 4
ROUNDS: Final = 1
LIMIT_S: Final = 90.0


def _first_opens(locations: LocationFactory) -> None:
    try:
        result = run_boot_storm(
            locations,
            processes=PROCESSES,
            rounds=ROUNDS,
            ttl_ms=None,
            timeout_s=LIMIT_S,
        )
    except ConfigError as exc:
        not_run(str(exc))
        return
    require(
        not result.failures,
        f"{PROCESSES} processes opening one fresh location at once (S11): "
        + "; ".join(_gist(failure) for failure in result.failures),
    )


def _gist(failure: str) -> str:
    """A child's failure in one line: who, and the last line of its stderr."""
    lines = [line.strip() for line in failure.splitlines() if line.strip()]
    head = lines[0].split(": exit", 1)[0] if lines else failure
    return f"{head}: {lines[-1]}" if lines else failure


def first_opens_conformance(certification: Certification) -> ConformanceSuite:
    """The concurrent-first-open check over fresh locations."""
    return ConformanceSuite(
        "first-opens",
        (
            build_check(
                "boot-concurrent-first-opens",
                f"{PROCESSES} processes open one fresh location at once; all succeed",
                ("S11", "X6"),
                partial(_first_opens, certification.locations),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "first-opens",
    first_opens_conformance,
    None,
    False,
    "processes opening one fresh location at once all boot it (S11)",
)
