"""``replaced-file``: a SQLite file removed or replaced under an open store (Q18).

A process that moves another file over the path (``mv other.db runs.db``, a
restore from backup) or removes it leaves an open store writing to an inode no
later opener sees. The store must notice on EVERY write, not once: the check
writes through a handle (so any one-time check has passed), replaces the file
with a copy, and then every write surface (append, put_meta, a blob put, a
lease) must raise ``ConfigError``, twice over; it then removes the file
outright and tries once more. Nothing refused may reach the file now at the path.

Runs for a location whose URL is ``sqlite:`` (or whose name is the database
file's path); other backends have no file to replace.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_store import LeasableStore, OpenedStore
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    UrlOpener,
    parse_store_url,
)
from rulvar_store.errors import ConfigError

__all__ = ["SPEC", "replaced_file_conformance"]

RUN: Final = "replaced-run"


def _database_path(location: StoreLocation) -> str | None:
    """The database file behind ``location``, when it is a SQLite file."""
    if isinstance(location.opener, UrlOpener):
        parsed = parse_store_url(location.opener.url)
        if parsed.scheme != "sqlite":
            return None
        path = parsed.parts.path[1:]
        return path if path and path != ":memory:" else None
    name = location.name
    return name if name.endswith(".db") and os.path.isfile(name) else None


def _writes(opened: OpenedStore, round_: int) -> dict[str, Callable[[], object]]:
    journal: Any = opened.journal
    calls: dict[str, Callable[[], object]] = {
        "append": lambda: journal.append(RUN, {"seq": 10 + round_, "kind": "late"}),
        "put_meta": lambda: journal.put_meta(
            {"runId": RUN, "status": f"late-{round_}"}
        ),
        "blob put": lambda: opened.transcripts.put(f"{RUN}/late-{round_}", b"late"),
    }
    if isinstance(journal, LeasableStore):
        calls["acquire"] = lambda: journal.acquire(f"{RUN}-{round_}", "late-owner")
    return calls


def _every_write_refused(opened: OpenedStore, round_: int, what: str) -> None:
    for name, call in _writes(opened, round_).items():
        outcome = attempt(call)
        require(
            isinstance(outcome.error, ConfigError),
            f"after the database file {what}, {name} (write {round_ + 1} since) "
            f"returned {outcome} instead of raising ConfigError: the file identity "
            "is not checked on every write (Q18)",
        )


def _replaced_file_refuses(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        opened = site.open()
        path = _database_path(site.location)  # after the open: the file exists
        if path is None:
            not_run("not a SQLite file location: there is no database file to replace")
        assert path is not None
        journal: Any = opened.journal
        journal.append(RUN, {"seq": 1, "kind": "before"})
        journal.put_meta({"runId": RUN, "status": "running"})
        opened.transcripts.put(f"{RUN}/before", b"before")
        copy = path + ".replacement"
        shutil.copyfile(path, copy)
        os.replace(copy, path)
        for round_ in range(2):
            _every_write_refused(opened, round_, "was replaced by another file")
        os.remove(path)
        _every_write_refused(opened, 2, "was removed")
        require(
            not os.path.exists(path),
            "a refused write created a database file at the removed path",
        )


def replaced_file_conformance(certification: Certification) -> ConformanceSuite:
    """The Q18 check over fresh locations."""
    return ConformanceSuite(
        "replaced-file",
        (
            build_check(
                "file-replaced-every-write",
                "a SQLite file replaced, then removed, under an open store: every "
                "later write raises ConfigError",
                ("Q18",),
                partial(_replaced_file_refuses, certification.locations),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "replaced-file",
    replaced_file_conformance,
    None,
    True,
    "a SQLite database file replaced or removed under an open store: every later "
    "write refused (Q18)",
)
