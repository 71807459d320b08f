"""Concurrent boot (Q4, X6): the bootstrap unit retried on the SQLITE_BUSY family.

Several processes constructing a store over one fresh file at once collide in
the WAL conversion and the DDL. The conversion upgrades a read lock to a write
lock, and SQLite never runs the busy handler on that path, so a driver busy
timeout alone does not help: the whole unit is retried instead, with short
sleeps, under a wall-clock bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TypeVar

import apsw

from rulvar_store_sqlite._errors import is_busy, translate

__all__ = ["BOOT_BUSY_TIMEOUT_MS", "boot_with_retry"]

BOOT_BUSY_TIMEOUT_MS: Final = 5_000

T = TypeVar("T")


def boot_with_retry(
    attempt: Callable[[], T],
    *,
    timeout_ms: int = BOOT_BUSY_TIMEOUT_MS,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``attempt`` until it returns, retrying only SQLITE_BUSY-family errors.

    Sleeps ``2 + n % 7`` ms after the n-th busy failure (n from 0) and gives up once
    ``timeout_ms`` wall milliseconds have passed since the first attempt.

    Raises:
        StoreBusyError: still busy after ``timeout_ms``; the last driver error is
            chained as ``__cause__``.
        ConfigError: a non-busy open failure (bad path, not a database), at once.
        StoreUnavailableError: a transient driver error (I/O, full disk), at once.
    """
    deadline = monotonic() + timeout_ms / 1000
    busy_attempt = 0
    while True:
        try:
            return attempt()
        except apsw.Error as exc:
            if not is_busy(exc) or monotonic() >= deadline:
                raise translate(exc, "boot", opening=True) from exc
            sleep((2 + busy_attempt % 7) / 1000)
            busy_attempt += 1
