"""The one place where psycopg and pool exceptions become the store's error tree.

Every call that touches the server runs inside ``translated(...)``; nothing from
psycopg or psycopg_pool crosses the SPI (CONTRACT 1.6). The original exception is
chained (``raise ... from exc``); messages name the operation and the target but
never a credential: the target is built without the password and any password
text the driver echoes is masked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from rulvar_store.errors import (
    ConfigError,
    ContractError,
    RulvarError,
    StoreBusyError,
    StoreUnavailableError,
)

__all__ = [
    "RETRYABLE_SQLSTATES",
    "SCHEMA_GONE_SQLSTATES",
    "sqlstate_of",
    "translated",
]

# Serialization failure and deadlock: the transaction rolled back, retry it whole.
RETRYABLE_SQLSTATES: Final = frozenset({"40001", "40P01"})
# Lock wait bounded by lock_timeout, statement cancelled (statement_timeout).
_BUSY_SQLSTATES: Final = frozenset({"55P03", "57014", "55006"})
# The booted objects vanished (schema dropped under a live store): boot again.
SCHEMA_GONE_SQLSTATES: Final = frozenset({"42P01", "42883", "3F000"})
# Server going away, connection-level failures, resources exhausted.
_UNAVAILABLE_PREFIXES: Final = ("08", "53", "57P", "58", "25P03", "XX")
_CONFIG_PREFIXES: Final = ("28", "3D", "42501")


def sqlstate_of(exc: BaseException | None) -> str | None:
    """The SQLSTATE of a psycopg error (or of what it chained), else ``None``."""
    while exc is not None:
        if isinstance(exc, psycopg.Error) and exc.sqlstate:
            return exc.sqlstate
        exc = exc.__cause__
    return None


def _mask(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _detail(exc: BaseException, secrets: Sequence[str]) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else type(exc).__name__
    state = getattr(exc, "sqlstate", None)
    prefix = f"{state}: " if state else ""
    return prefix + _mask(first, secrets)


@contextmanager
def translated(
    operation: str, where: str, secrets: Sequence[str] = ()
) -> Iterator[None]:
    """Run the body, turning driver and pool failures into typed store errors.

    ``RulvarError`` and non-driver exceptions (``TypeError``/``ValueError`` from
    serialization, D2) pass through unchanged.

    Raises:
        StoreBusyError: lock_timeout, serialization failure or deadlock, statement
            cancelled, or no pooled connection free in time; nothing was written.
        StoreUnavailableError: the server could not be reached or the connection
            dropped; an in-flight commit's outcome is unknown.
        ContractError: the store was closed, or the server refused the data
            (SQLSTATE class 22, e.g. a seq the Appendix P index cannot cast).
        ConfigError: authentication, unknown database or missing privileges.
    """
    try:
        yield
    except RulvarError:
        raise
    except PoolClosed as exc:
        raise ContractError(f"{operation} on {where}: the store is closed") from exc
    except (PoolTimeout, TooManyRequests) as exc:
        raise StoreBusyError(
            f"{operation} on {where}: no pooled connection became free in time "
            f"({_detail(exc, secrets)}); raise pool_max_size or retry",
            operation,
        ) from exc
    except psycopg.Error as exc:
        raise _classify(exc, operation, where, secrets) from exc


def _classify(
    exc: psycopg.Error, operation: str, where: str, secrets: Sequence[str]
) -> RulvarError:
    state = exc.sqlstate or ""
    detail = _detail(exc, secrets)
    if state in RETRYABLE_SQLSTATES or state in _BUSY_SQLSTATES:
        return StoreBusyError(
            f"{operation} on {where}: contention outlasted its bound ({detail}); "
            "nothing was written, retry",
            operation,
        )
    if state.startswith("22"):
        return ContractError(
            f"{operation} on {where}: the server refused the data ({detail}); "
            "Appendix P casts payloads to jsonb and seq to numeric, so a seq that "
            "is not a number (e.g. true or 'x') or a \\u0000 in a string cannot be "
            "stored"
        )
    if state.startswith(_CONFIG_PREFIXES):
        return ConfigError(f"{operation} on {where}: {detail}")
    if state.startswith(_UNAVAILABLE_PREFIXES) or not state:
        return StoreUnavailableError(
            f"{operation} on {where}: the database is unreachable or the connection "
            f"dropped ({detail}); the outcome of an in-flight commit is unknown",
            operation,
        )
    return StoreUnavailableError(
        f"{operation} on {where}: unexpected database error ({detail})", operation
    )
