"""Constructor intake (Q1, D9): every option is checked before the file is touched."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from rulvar_store import Clock
from rulvar_store.backend import system_clock_ms, validate_ttl_ms
from rulvar_store.errors import ConfigError

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "MEMORY_PATH",
    "SYNCHRONOUS_LEVELS",
    "SqliteOptions",
    "Synchronous",
    "validate_options",
]

MEMORY_PATH: Final = ":memory:"

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
"""Longest a write waits for the file's write lock before ``StoreBusyError``.

Well below the default 60 s lease ttl: a holder paused inside a write transaction
blocks every writer of the file, and a renewing holder must learn about it (and
stop paid work, L10) long before its lease can expire.
"""

MAX_BUSY_TIMEOUT_MS: Final = 2_147_483_647

Synchronous: TypeAlias = Literal["FULL", "NORMAL"]
# PRAGMA synchronous reads back as a number: FULL = 2, NORMAL = 1.
SYNCHRONOUS_LEVELS: Final[dict[str, int]] = {"FULL": 2, "NORMAL": 1}


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """Validated constructor options; ``path`` is absolute unless in memory."""

    path: str
    in_memory: bool
    ttl_ms: int
    busy_timeout_ms: int
    synchronous: Synchronous
    now: Clock
    readonly: bool = False
    group_commit: bool = True
    private: bool = True


def _path(path: object) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ConfigError(
            "SqliteStore path must be a non-empty str or path, or ':memory:', "
            f"got {path!r}"
        )
    if "\x00" in path:
        raise ConfigError("SqliteStore path must not contain NUL characters")
    return path if path == MEMORY_PATH else os.path.abspath(path)


def _busy_timeout_ms(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"busy_timeout_ms must be an int, got {type(value).__name__}")
    if not 0 <= value <= MAX_BUSY_TIMEOUT_MS:
        raise ConfigError(
            f"busy_timeout_ms must be between 0 and {MAX_BUSY_TIMEOUT_MS}, got {value}"
        )
    return value


def _synchronous(value: object) -> Synchronous:
    if isinstance(value, str) and value.upper() == "FULL":
        return "FULL"
    if isinstance(value, str) and value.upper() == "NORMAL":
        return "NORMAL"
    raise ConfigError(f"synchronous must be 'FULL' or 'NORMAL', got {value!r}")


def validate_options(
    path: object,
    *,
    ttl_ms: object,
    busy_timeout_ms: object,
    synchronous: object,
    now: object,
    readonly: object = False,
    group_commit: object = True,
    private: object = True,
) -> SqliteOptions:
    """Return the checked options.

    Raises:
        ConfigError: any option is invalid; nothing has been opened yet.
    """
    ttl = validate_ttl_ms(ttl_ms)
    checked_path = _path(path)
    if now is not None and not callable(now):
        raise ConfigError(f"now must be a callable returning Unix ms, got {now!r}")
    clock: Clock = now if now is not None else system_clock_ms
    if not isinstance(readonly, bool):
        raise ConfigError(f"readonly must be a bool, got {type(readonly).__name__}")
    if readonly and checked_path == MEMORY_PATH:
        raise ConfigError("readonly needs a database file: ':memory:' starts empty")
    if not isinstance(group_commit, bool):
        raise ConfigError(
            f"sqlite: group_commit must be a bool, got {type(group_commit).__name__}"
        )
    if not isinstance(private, bool):
        raise ConfigError(
            f"sqlite: private must be a bool, got {type(private).__name__}"
        )
    return SqliteOptions(
        path=checked_path,
        in_memory=checked_path == MEMORY_PATH,
        ttl_ms=ttl,
        busy_timeout_ms=_busy_timeout_ms(busy_timeout_ms),
        synchronous=_synchronous(synchronous),
        now=clock,
        readonly=readonly,
        group_commit=group_commit,
        private=private,
    )
