"""The one place where apsw exceptions become SPI errors; none cross the SPI raw.

Mapping (``raise ... from exc`` keeps the driver error as ``__cause__``):

- the SQLITE_BUSY family (``apsw.BusyError``, any extended code whose low byte is 5,
  e.g. 261 BUSY_RECOVERY, 517 BUSY_SNAPSHOT) and ``apsw.LockedError`` ->
  ``StoreBusyError`` (retryable; the transaction was rolled back, nothing written);
- ``apsw.ConnectionClosedError`` / ``apsw.CursorClosedError`` -> ``ContractError``
  (the caller used a closed store);
- ``apsw.TooBigError`` -> ``ContractError`` (the record exceeds SQLite's limits);
- ``apsw.CantOpenError``, ``NotADBError``, ``PermissionsError``, ``ReadOnlyError``
  -> ``StoreUnavailableError`` at run time, ``ConfigError`` while opening;
- every other ``apsw.Error`` -> ``StoreUnavailableError``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Final, final

import apsw

from rulvar_store.errors import (
    ConfigError,
    ContractError,
    RulvarError,
    StoreBusyError,
    StoreUnavailableError,
)

__all__ = ["SQLITE_BUSY", "is_busy", "translate", "translate_errors"]

SQLITE_BUSY: Final = 5

_OPEN_FAILURES: Final = (
    apsw.CantOpenError,
    apsw.NotADBError,
    apsw.PermissionsError,
    apsw.ReadOnlyError,
)


def is_busy(exc: BaseException) -> bool:
    """Return whether ``exc`` is in the SQLITE_BUSY family (retry may succeed)."""
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return True
    extended = getattr(exc, "extendedresult", None)
    return isinstance(extended, int) and extended & 0xFF == SQLITE_BUSY


def translate(exc: apsw.Error, operation: str, *, opening: bool = False) -> RulvarError:
    """Return the SPI error for a driver error raised by ``operation``."""
    detail = f"sqlite {operation}: {type(exc).__name__}: {exc}"
    if is_busy(exc):
        return StoreBusyError(
            f"{detail} (the database stayed locked past the busy timeout; "
            "nothing was written, retry later)",
            operation,
        )
    if isinstance(exc, apsw.ConnectionClosedError | apsw.CursorClosedError):
        return ContractError(f"{detail} (the store is closed)")
    if isinstance(exc, apsw.TooBigError):
        return ContractError(f"{detail} (the record exceeds SQLite's size limits)")
    if opening and isinstance(exc, _OPEN_FAILURES):
        return ConfigError(f"{detail} (check the database path and permissions)")
    return StoreUnavailableError(detail, operation)


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
