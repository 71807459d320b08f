"""What the ``rulvar runs`` commands share: bounded store access, output hygiene.

Every observer is a potential writer unless proven otherwise, so the read-only
commands open stores in their read-only modes (SQLite ``SQLITE_OPEN_READONLY``,
PostgreSQL read-only sessions without the boot DDL, the file store without
torn-tail repair). Every store call is bounded twice: by the backend's own wait
limit (SQLite busy timeout, PostgreSQL lock and connect timeouts), which raises a
typed error, and by a watchdog that ends the process with a clear message if a
call outlives that bound anyway (a store that stopped answering mid-call).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO, TypeVar

import click

from rulvar_cli._common import EXIT_FAILED, EXIT_UNAVAILABLE, fail
from rulvar_store import OpenedStore, RunFilter, open_store
from rulvar_store.backend import option_bool, parse_store_url
from rulvar_store.errors import ConfigError, StoreBusyError, StoreUnavailableError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EXIT_UNAVAILABLE",
    "OPERATOR_LEASE_TTL_MS",
    "Progress",
    "Watchdog",
    "open_for_operator",
    "sanitize",
    "store_did_not_answer",
]

T = TypeVar("T")

DEFAULT_TIMEOUT_S: Final = 10.0
# The brief lease of a repair, delete or prune: long enough for one run's work,
# short enough that a killed operator frees the run quickly.
OPERATOR_LEASE_TTL_MS: Final = 30_000
# How long past its own bound a call may run before the watchdog steps in.
_WATCHDOG_SLACK_S: Final = 2.0
_POSTGRES_SCHEMES: Final = ("postgresql", "postgres")


def sanitize(text: object) -> str:
    """Return ``text`` with terminal control characters shown as escapes.

    Run ids and reasons come from the store; a run id holding ``ESC [2J`` must
    not clear the operator's screen, nor a bidi override reorder the line.
    """
    out: list[str] = []
    for char in str(text):
        if unicodedata.category(char) in ("Cc", "Cf"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def _options(
    scheme: str, raw_options: dict[str, Any], *, write: bool, timeout_s: float
) -> dict[str, Any]:
    """Keyword options that make ``scheme``'s store read-only (unless ``write``) and bounded."""
    timeout_ms = max(1, int(timeout_s * 1000))
    if scheme == "sqlite":
        options: dict[str, Any] = {"busy_timeout_ms": timeout_ms}
        if write:
            options["ttl_ms"] = OPERATOR_LEASE_TTL_MS
        else:
            options["readonly"] = True
        return options
    if scheme in _POSTGRES_SCHEMES:
        options = {
            "lock_timeout_ms": timeout_ms,
            "connect_timeout_s": max(1, math.ceil(timeout_s)),
            "pool_max_size": 2,
        }
        if write:
            options["ttl_ms"] = OPERATOR_LEASE_TTL_MS
        else:
            options["readonly"] = True
        return options
    if scheme == "file":
        if not write:
            return {"repair": False}  # a torn tail is reported, never truncated
        if not option_bool(raw_options, "repair", True):
            # A6: a verify-only load switch together with --repair exits 1.
            click.echo(
                "rulvar: the URL asks for verify-only loads (repair=false), which "
                "cannot be combined with --repair",
                err=True,
            )
            sys.exit(EXIT_FAILED)
    return {}


@contextmanager
def open_for_operator(
    url: str, *, write: bool, timeout_s: float, watchdog: Watchdog
) -> Iterator[OpenedStore]:
    """Open ``url``'s store read-only (or, with ``write``, for brief leased writes).

    A writer over SQLite or PostgreSQL first opens the store read-only and reads
    one page of runs: a mistyped path or schema is then an error, instead of a
    new empty database or schema created by the writer's bootstrap.

    Raises:
        ConfigError: bad URL, unknown scheme, unreadable or foreign store.
        StoreUnavailableError: the schema holds no store (PostgreSQL).
    """
    parsed = parse_store_url(url)
    options = _options(
        parsed.scheme, dict(parsed.options), write=write, timeout_s=timeout_s
    )
    if write and (parsed.scheme == "sqlite" or parsed.scheme in _POSTGRES_SCHEMES):
        probe_options = _options(
            parsed.scheme, dict(parsed.options), write=False, timeout_s=timeout_s
        )
        with (
            watchdog.bound(f"checking {parsed.redacted}"),
            open_store(url, **probe_options) as probe,
        ):
            probe.journal.list_runs(
                RunFilter(name="rulvar: probe, no run has this name")
            )
    with watchdog.bound(f"opening {parsed.redacted}"):
        opened = open_store(url, **options)
    try:
        yield opened
    finally:
        with watchdog.bound("closing the store"):
            opened.close()


def store_did_not_answer(
    exc: StoreBusyError | StoreUnavailableError, timeout_s: float
) -> None:
    """Print why the pass stopped and exit ``EXIT_UNAVAILABLE``."""
    fail(
        exc.code,
        f"{sanitize(exc)} (each store call is bounded by --timeout {timeout_s:g} s); "
        "stopped",
        EXIT_UNAVAILABLE,
    )


class Watchdog:
    """Ends the process if one bounded step outlives its limit; never waits itself.

    The backends' own timeouts normally fire first (a typed, retryable error the
    command reports). The watchdog catches what they cannot: a call stuck below
    them. It prints what was running and exits with ``EXIT_UNAVAILABLE``; a lease
    this process held is then freed by its ttl.
    """

    def __init__(self, timeout_s: float, *, stream: TextIO | None = None) -> None:
        if not timeout_s > 0:
            raise ConfigError(f"--timeout must be above 0 s, got {timeout_s}")
        self.timeout_s = timeout_s
        self._limit_s = timeout_s + max(_WATCHDOG_SLACK_S, timeout_s / 2)
        self._stream = stream
        self._cond = threading.Condition()
        self._step: tuple[str, float] | None = None
        self._stopped = False
        self._thread = threading.Thread(
            target=self._watch, name="rulvar-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the watch (the command is done); idempotent."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()

    @contextmanager
    def bound(self, label: str) -> Iterator[None]:
        """Bound the enclosed step to the timeout (plus slack)."""
        with self._cond:
            self._step = (label, time.monotonic() + self._limit_s)
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._step = None

    def pace(self, items: Iterable[T], label: str) -> Iterator[T]:
        """Yield from ``items``, bounding the wait for each next item."""
        iterator = iter(items)
        while True:
            with self.bound(label):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    def _watch(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._cond.wait(timeout=0.1)
                step = self._step
            if step is not None and time.monotonic() > step[1]:
                stream = self._stream if self._stream is not None else sys.stderr
                stream.write(
                    f"rulvar: the store did not answer while {sanitize(step[0])} "
                    f"within {self.timeout_s:g} s (+{self._limit_s - self.timeout_s:g} s "
                    "slack); stopped (is a writer paused inside a transaction, or a "
                    "lock held?)\n"
                )
                stream.flush()
                os._exit(EXIT_UNAVAILABLE)


class Progress:
    """A one-line counter on stderr while a long pass runs; silent unless a terminal."""

    def __init__(self, noun: str, *, enabled: bool | None = None) -> None:
        self._noun = noun
        self._enabled = sys.stderr.isatty() if enabled is None else enabled
        self._count = 0
        self._shown_at = 0.0

    def step(self) -> None:
        self._count += 1
        now = time.monotonic()
        if self._enabled and now - self._shown_at >= 0.2:
            self._shown_at = now
            click.echo(f"\r  {self._noun}: {self._count}", err=True, nl=False)

    def done(self) -> None:
        if self._enabled and self._shown_at:
            click.echo("\r\x1b[K", err=True, nl=False)
