"""Opening the store's one connection: bootstrap, busy handler, durability (Q3-Q5)."""

from __future__ import annotations

import errno
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import final

import apsw

from rulvar_store.errors import ConfigError, StoreUnavailableError
from rulvar_store_sqlite._boot import boot_with_retry
from rulvar_store_sqlite._errors import translate_errors
from rulvar_store_sqlite._exact_seq import register_seq_functions
from rulvar_store_sqlite._file_identity import refuse_orphan_wal
from rulvar_store_sqlite._options import SYNCHRONOUS_LEVELS, SqliteOptions
from rulvar_store_sqlite._schema import check_format_readonly

__all__ = ["BootAttempt", "BusyDeadline", "open_connection"]

BootAttempt = Callable[[apsw.Connection, bool], None]
"""One bootstrap unit: ``(connection, in_memory)``; retried while it raises busy."""


@final
class BusyDeadline:
    """The connection's busy handler: sleep 1-2 ms (jittered) and retry until a deadline.

    The store arms it with ``busy_timeout_ms`` at the start of every call
    (``time.monotonic``); past the deadline it returns False, SQLite raises busy,
    and the store reports ``StoreBusyError``.

    Fairness is the reason for a handler of our own. SQLite's default busy timeout
    sleeps with growing back-off (1, 2, 5, 10 ... 100 ms) while the process that
    just committed takes the write lock again at once: with four processes
    appending, one got a single commit in 2 s and waits reached the 5 s timeout.
    Short constant sleeps keep every waiter polling often, and the jitter keeps
    them from polling in lockstep. ``bench/bench_sqlite.py`` measured 4 processes
    appending to one file (synchronous=FULL, 2 CPUs) at 0.67-1.56x the
    one-process rate (median about 1x), the least-served process getting 63-91 %
    of the mean share, worst single wait 90-230 ms, no busy errors. A FIFO-ish
    queue through a blocking ``flock`` on a sidecar file was also built and
    measured: 0.56-0.77x and 46-90 %, because every hand-over waits for a kernel
    wake-up plus a helper thread (a blocking flock cannot time out otherwise).
    """

    __slots__ = ("_deadline", "_timeout_s", "retries")

    def __init__(self, busy_timeout_ms: int) -> None:
        self._timeout_s = busy_timeout_ms / 1000
        self._deadline = 0.0
        self.retries = 0  # waits granted, for stats(): a plain add, the store lock held

    def arm(self) -> None:
        """Start a call: waits from now on end ``busy_timeout_ms`` later."""
        self._deadline = time.monotonic() + self._timeout_s

    def __call__(self, prior_calls: int) -> bool:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.retries += 1
        time.sleep(min(remaining, 0.001 + random.random() / 1000))
        return True


def open_connection(
    options: SqliteOptions, attempt: BootAttempt, busy: BusyDeadline
) -> apsw.Connection:
    """Open, bootstrap (retried on busy, Q4), then install the runtime settings.

    The busy handler comes only after the bootstrap (Q5): during it a busy
    statement fails at once and the whole unit is retried. ``synchronous`` is set
    and read back, since it is per connection and builds differ in its default.

    Raises:
        ConfigError: unopenable path, foreign schema, or a setting not taking.
        StoreBusyError: the bootstrap stayed busy for ``BOOT_BUSY_TIMEOUT_MS``.
    """
    if options.readonly:
        return _open_readonly(options, busy)
    if not options.in_memory:
        refuse_orphan_wal(options.path)
        if options.private:
            _create_private(options.path)
    # The path is in the operation so an unopenable file is named in the error.
    with translate_errors(f"open of {options.path}", opening=True):
        connection = apsw.Connection(options.path)
    try:
        register_seq_functions(connection)
        boot_with_retry(lambda: attempt(connection, options.in_memory))
        with translate_errors("open", opening=True):
            connection.set_busy_handler(busy)
            cursor = connection.cursor()
            try:
                cursor.execute(f"PRAGMA synchronous={options.synchronous}")
                level = cursor.execute("PRAGMA synchronous").fetchall()[0][0]
            finally:
                cursor.close()
        if level != SYNCHRONOUS_LEVELS[options.synchronous]:
            raise ConfigError(
                f"sqlite: PRAGMA synchronous={options.synchronous} read back as {level}"
            )
    except BaseException:
        connection.close()
        raise
    return connection


def _create_private(path: str) -> None:
    """Create a missing database file owner-only (0600) before SQLite opens it.

    SQLite gives the ``-wal`` and ``-shm`` files the mode of the database
    file, so the three stay owner-only; they hold prompts and tool outputs.
    An existing file keeps its mode (the operator chose it). A file another
    process creates first is simply used; an empty file is an empty database.
    """
    with translate_os_errors(f"create {path}"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        os.close(fd)


@contextmanager
def translate_os_errors(operation: str) -> Iterator[None]:
    """A missing folder or no permission: ``ConfigError``; no descriptor left: retryable."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise StoreUnavailableError(
                f"sqlite {operation}: {exc.strerror} (out of file descriptors: "
                "retry once some are closed)",
                operation,
            ) from exc
        raise ConfigError(
            f"sqlite {operation}: {exc.strerror or exc} (check the database path "
            "and permissions)"
        ) from exc


def _open_readonly(options: SqliteOptions, busy: BusyDeadline) -> apsw.Connection:
    """Open with ``SQLITE_OPEN_READONLY``: no bootstrap, no WAL switch, no pragma write.

    SQLite itself then refuses every write on this connection, so an observer
    built on it cannot change the file even by mistake. The file must already be
    a store of this format (checked with reads only).

    Raises:
        ConfigError: missing or unreadable file, or not a rulvar store.
    """
    with translate_errors("open", opening=True):
        connection = apsw.Connection(options.path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        with translate_errors("open", opening=True):
            connection.set_busy_handler(busy)
            busy.arm()
            check_format_readonly(connection)
    except BaseException:
        connection.close()
        raise
    return connection
