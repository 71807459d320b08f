"""The one place where apsw exceptions become SPI errors; none cross the SPI raw.

Mapping (``raise ... from exc`` keeps the driver error as ``__cause__``):

- the SQLITE_BUSY family (``apsw.BusyError``, any extended code whose low byte is 5,
  e.g. 261 BUSY_RECOVERY, 517 BUSY_SNAPSHOT) and ``apsw.LockedError`` ->
  ``StoreBusyError`` (retryable; the transaction was rolled back, nothing written);
- ``apsw.ConnectionClosedError`` / ``apsw.CursorClosedError`` -> ``StoreClosedError``
  (the caller used a closed store);
- ``apsw.TooBigError``, ``ConstraintError``, ``MismatchError``, ``RangeError``,
  ``BindingsError`` -> ``ContractError`` (the data; never retryable);
- ``apsw.CantOpenError``, ``NotADBError``, ``PermissionsError``, ``ReadOnlyError``
  -> ``ConfigError`` while opening, except a ``CantOpenError`` while the
  process is out of file descriptors: ``StoreUnavailableError`` (retryable, as
  PostgreSQL and the file store report it);
- ``apsw.SQLError`` (tables of another shape), ``CorruptError``, ``NotADBError``,
  ``PermissionsError``, ``ReadOnlyError`` (except recovery in progress),
  ``AuthError``, ``FormatError`` -> ``ConfigError`` at run time (the setup);
- every other ``apsw.Error`` (full disk, I/O error, interrupted) ->
  ``StoreUnavailableError``, the only retryable outcome besides busy.
"""

from __future__ import annotations

import errno
import os
from types import TracebackType
from typing import Final, final

import apsw

from rulvar_store.errors import (
    ConfigError,
    ContractError,
    RulvarError,
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)

__all__ = [
    "SQLITE_BUSY",
    "is_busy",
    "out_of_descriptors",
    "translate",
    "translate_errors",
]

SQLITE_BUSY: Final = 5

_OPEN_FAILURES: Final = (
    apsw.CantOpenError,
    apsw.NotADBError,
    apsw.PermissionsError,
    apsw.ReadOnlyError,
)
# The call's data or shape: the same call can never succeed.
_REFUSED_DATA: Final = (
    apsw.ConstraintError,
    apsw.MismatchError,
    apsw.RangeError,
    apsw.BindingsError,
)
# The file, its permissions or its tables: an operator must fix the setup.
_SETUP_FAILURES: Final = (
    apsw.SQLError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.PermissionsError,
    apsw.ReadOnlyError,
    apsw.AuthError,
    apsw.FormatError,
)
# SQLITE_READONLY_RECOVERY (264) and _CANTLOCK (520) pass once WAL recovery or
# another connection's lock is done.
_READONLY_TRANSIENT: Final = frozenset({264, 520})


def is_busy(exc: BaseException) -> bool:
    """Return whether ``exc`` is in the SQLITE_BUSY family (retry may succeed)."""
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return True
    extended = getattr(exc, "extendedresult", None)
    return isinstance(extended, int) and extended & 0xFF == SQLITE_BUSY


def translate(exc: apsw.Error, operation: str, *, opening: bool = False) -> RulvarError:
    """Return the SPI error for a driver error raised by ``operation``.

    Only transient conditions come out retryable: contention, a full disk, I/O
    errors, an interrupted or aborted statement, recovery in progress.
    """
    detail = f"sqlite {operation}: {type(exc).__name__}: {exc}"
    if is_busy(exc):
        return StoreBusyError(
            f"{detail} (the database stayed locked past the busy timeout; "
            "nothing was written, retry later)",
            operation,
        )
    if isinstance(exc, apsw.ConnectionClosedError | apsw.CursorClosedError):
        return StoreClosedError(f"{detail} (the store is closed)", operation)
    if isinstance(exc, apsw.TooBigError):
        return ContractError(f"{detail} (the record exceeds SQLite's size limits)")
    if isinstance(exc, _REFUSED_DATA):
        return ContractError(f"{detail} (SQLite refused the data)")
    if opening and isinstance(exc, apsw.CantOpenError) and out_of_descriptors():
        return StoreUnavailableError(
            f"{detail} (this process is out of file descriptors: retry once some "
            "are closed)",
            operation,
        )
    if opening and isinstance(exc, _OPEN_FAILURES):
        return ConfigError(f"{detail} (check the database path and permissions)")
    if isinstance(exc, apsw.ReadOnlyError) and _extended(exc) in _READONLY_TRANSIENT:
        return StoreUnavailableError(detail, operation)
    if isinstance(exc, _SETUP_FAILURES):
        return ConfigError(
            f"{detail} (the file, its permissions or its tables are not what this "
            "store needs; retrying cannot help)"
        )
    return StoreUnavailableError(detail, operation)


# The process (EMFILE) or the system (ENFILE) has no descriptor left: a state
# that passes, as on the other backends, unlike a wrong path or permission.
_NO_DESCRIPTOR: Final = frozenset({errno.EMFILE, errno.ENFILE})


def out_of_descriptors() -> bool:
    """Whether opening a file fails right now for want of a descriptor.

    SQLite reports every failed open as SQLITE_CANTOPEN without the errno, so
    the cause is asked of the system directly, with one open of ``/dev/null``.
    """
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError as exc:
        return exc.errno in _NO_DESCRIPTOR
    os.close(fd)
    return False


def _extended(exc: apsw.Error) -> int | None:
    extended = getattr(exc, "extendedresult", None)
    return extended if isinstance(extended, int) else None


@final
class translate_errors:  # lower case: used like a function, `with translate_errors(op):`
    """Context manager re-raising any ``apsw.Error`` as its SPI error, chained.

    A class rather than ``@contextmanager``: it wraps every store call, so it stays
    a plain ``__enter__``/``__exit__`` pair without a generator frame.
    """

    __slots__ = ("_opening", "_operation")

    def __init__(self, operation: str, *, opening: bool = False) -> None:
        self._operation = operation
        self._opening = opening

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(exc, apsw.Error):
            raise translate(exc, self._operation, opening=self._opening) from exc
