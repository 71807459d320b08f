"""The one place where psycopg and pool exceptions become the store's error tree.

Every call that touches the server runs inside ``translated(...)``; nothing from
psycopg or psycopg_pool crosses the SPI (CONTRACT 1.6). The original exception is
chained (``raise ... from exc``); messages name the operation and the target but
never a credential: the target is built without the password and any password
text the driver echoes is masked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from types import TracebackType
from typing import Final

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from rulvar_store.errors import (
    ConfigError,
    ContractError,
    RulvarError,
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)
from rulvar_store_postgres._log_mask import masked
from rulvar_store_postgres._pool import ConnectFailed
from rulvar_store_postgres._primary import NotPrimary, Refused, ReplicationUnconfirmed

__all__ = [
    "RETRYABLE_SQLSTATES",
    "SCHEMA_GONE_SQLSTATES",
    "mutation_result",
    "no_store",
    "retry_delay",
    "schema_gone",
    "sqlstate_of",
    "translated",
]

# 40001/40P01 roll the whole transaction back; retry it this many more times.
_SERIALIZATION_RETRIES: Final = 3

# Serialization failure and deadlock: the transaction rolled back, retry it whole.
RETRYABLE_SQLSTATES: Final = frozenset({"40001", "40P01"})
# Lock wait bounded by lock_timeout, statement cancelled (statement_timeout).
_BUSY_SQLSTATES: Final = frozenset({"55P03", "57014", "55006"})
# The booted objects vanished (schema dropped under a live store): boot again.
SCHEMA_GONE_SQLSTATES: Final = frozenset({"42P01", "42883", "3F000"})
# Transient by nature: connection exceptions (08), resources exhausted (53),
# operator intervention such as a shutdown (57), system I/O errors (58), snapshot
# too old (72), an idle-in-transaction cutoff, commit outcome unknown, and the
# server's internal errors (XX), which a healthy retry may not meet again.
_TRANSIENT_PREFIXES: Final = ("08", "53", "57", "58", "72", "XX")
_TRANSIENT_STATES: Final = frozenset({"25P03", "40003"})
# The caller's data: data exceptions (22), integrity (23), program limits (54).
_DATA_PREFIXES: Final = ("22", "23", "54")
# Connection refusals that no retry fixes: wrong credentials, missing role or
# database, no pg_hba entry. libpq reports them as text without a SQLSTATE.
_REFUSED_LOGIN: Final = (
    "does not exist",
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "password supplied",
    "no password",
    "permission denied",
)
# Connection settings that no retry can make work, as libpq and psycopg word
# them: an option value libpq rejects, a host name that does not exist.
_IMPOSSIBLE_CONNECT: Final = re.compile(
    r"invalid [\w ]+ value|invalid port number|invalid integer value"
    r"|Name or service not known|nodename nor servname provided"
    r"|No address associated with hostname"
)
_SOCKET: Final = re.compile(r'on socket "([^"]+)" failed: No such file or directory')
# Operations that only read: a connection lost under them leaves no write behind.
_READS: Final = frozenset(
    {
        "load",
        "get_meta",
        "list_runs",
        "blob_get",
        "blob_list",
        "blob_last_ref",
        "blob_get_under",
        "connect",
    }
)


def sqlstate_of(exc: BaseException | None) -> str | None:
    """The SQLSTATE of a psycopg error (or of what it chained), else ``None``."""
    while exc is not None:
        if isinstance(exc, psycopg.Error) and exc.sqlstate:
            return exc.sqlstate
        exc = exc.__cause__
    return None


def retry_delay(exc: StoreBusyError, attempt: int) -> float | None:
    """Seconds to wait before running a rolled-back mutation again, or ``None``.

    Only serialization failures and deadlocks are retried (the whole call was
    rolled back), a few times, with a growing pause.
    """
    if (
        sqlstate_of(exc.__cause__) in RETRYABLE_SQLSTATES
        and attempt < _SERIALIZATION_RETRIES
    ):
        return 0.002 * (attempt + 1)
    return None


def schema_gone(exc: StoreUnavailableError) -> bool:
    """Whether the store's objects vanished (the schema was dropped): boot again."""
    return sqlstate_of(exc.__cause__) in SCHEMA_GONE_SQLSTATES


def no_store(operation: str, where: str, schema: str) -> ConfigError:
    """A read-only handle on a schema without the store's tables: a wrong name.

    Creating nothing is the point of a read-only handle, so the missing tables
    are not a lost store (which the next call would create again).
    """
    return ConfigError(
        f"{operation} on {where}: schema {schema!r} holds no rulvar store (a "
        "read-only handle creates nothing); check the schema name"
    )


def mutation_result(row: tuple[object, ...] | None, operation: str, where: str) -> int:
    """The integer an operation function returned."""
    if row is None or not isinstance(row[0], int):  # pragma: no cover - never NULL
        raise StoreUnavailableError(f"{operation} on {where}: no result", operation)
    return row[0]


def _detail(exc: BaseException, secrets: Sequence[str]) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else type(exc).__name__
    state = getattr(exc, "sqlstate", None)
    prefix = f"{state}: " if state else ""
    return prefix + masked(first, secrets)


def translated(operation: str, where: str, secrets: Sequence[str] = ()) -> Translation:
    """Run the body, turning driver and pool failures into typed store errors.

    ``RulvarError`` and non-driver exceptions pass through unchanged. Only
    transient conditions come out retryable.

    Raises:
        StoreBusyError: lock_timeout, serialization failure or deadlock, statement
            cancelled, or no pooled connection free in time; nothing was written.
        StoreUnavailableError: the server could not be reached (nothing was sent),
            or the connection dropped mid-call (a write's outcome is unknown).
        StoreClosedError: the store was closed.
        ContractError: the server or driver refused the data (SQLSTATE classes
            22, 23, 54).
        ConfigError: a login the server refuses (credentials, role, database),
            missing privileges, or a statement the server cannot run here
            (other SQLSTATEs: a schema or server that does not match).
    """
    return Translation(operation, where, secrets)


class Translation:
    """The context manager ``translated`` returns (see there).

    A class, not a generator: it runs around every statement, and a
    ``@contextmanager`` costs a generator and its frame on entry and exit.
    """

    __slots__ = ("_operation", "_secrets", "_where")

    def __init__(self, operation: str, where: str, secrets: Sequence[str]) -> None:
        self._operation = operation
        self._where = where
        self._secrets = secrets

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, RulvarError):
            return
        operation, where, secrets = self._operation, self._where, self._secrets
        if isinstance(exc, PoolClosed):
            raise StoreClosedError(
                f"{operation} on {where}: the store is closed", operation
            ) from exc
        if isinstance(exc, Refused):
            raise exc.config_error from None
        if isinstance(exc, NotPrimary):
            # Nothing was written on a server that is not the primary (P18).
            raise StoreUnavailableError(
                f"{operation} on {where}: {_detail(exc, secrets)}", operation
            ) from exc
        if isinstance(exc, ReplicationUnconfirmed):
            raise StoreUnavailableError(
                f"{operation} on {where}: {_detail(exc, secrets)}; the outcome of "
                "this write is unknown (a failover may lose it): check before "
                "repeating it",
                operation,
            ) from exc
        if isinstance(exc, ConnectFailed):
            raise _not_connected(exc, operation, where, _detail(exc, secrets)) from exc
        if isinstance(exc, (PoolTimeout, TooManyRequests)):
            raise StoreBusyError(
                f"{operation} on {where}: no pooled connection became free in time "
                f"({_detail(exc, secrets)}); raise pool_max_size or retry",
                operation,
            ) from exc
        if isinstance(exc, psycopg.Error):
            raise _classify(exc, operation, where, secrets) from exc


def _not_connected(
    exc: ConnectFailed, operation: str, where: str, detail: str
) -> RulvarError:
    """A connection that could not be made: nothing was sent, so no outcome is unknown.

    Permanent (``ConfigError``) when no retry can help: a login the server
    refuses, an option value libpq rejects, a host name that does not resolve,
    a socket directory that does not exist. Otherwise (refused, timed out, a
    socket file missing because the server is down) retryable.
    """
    text = str(exc)
    if any(marker in text for marker in _REFUSED_LOGIN):
        return ConfigError(
            f"{operation} on {where}: the server refused the login ({detail}); "
            "check the user, password and database name"
        )
    socket = _SOCKET.search(text)
    if _IMPOSSIBLE_CONNECT.search(text) or (
        socket is not None and not os.path.isdir(os.path.dirname(socket.group(1)))
    ):
        return ConfigError(
            f"{operation} on {where}: these connection settings cannot connect "
            f"({detail}); nothing was sent: fix the URL"
        )
    return StoreUnavailableError(
        f"{operation} on {where}: could not connect to the server ({detail}); "
        "nothing was sent, retry when it is reachable",
        operation,
    )


def _connection_lost(operation: str, where: str, detail: str) -> StoreUnavailableError:
    if operation in _READS:
        tail = "nothing was written; retry"
    else:
        tail = "the outcome of this write is unknown: check before repeating it"
    return StoreUnavailableError(
        f"{operation} on {where}: the connection dropped mid-call ({detail}); {tail}",
        operation,
    )


def _unclassified(
    exc: psycopg.Error, operation: str, where: str, detail: str
) -> RulvarError:
    """A driver error without a SQLSTATE: raised by psycopg or libpq on the client."""
    text = str(exc)
    if text.startswith("connection failed") or isinstance(
        exc, psycopg.errors.ConnectionTimeout
    ):
        if any(marker in text for marker in _REFUSED_LOGIN):
            return ConfigError(
                f"{operation} on {where}: the server refused the login ({detail}); "
                "check the user, password and database name"
            )
        return StoreUnavailableError(
            f"{operation} on {where}: could not connect to the server ({detail}); "
            "nothing was sent, retry when it is reachable",
            operation,
        )
    if isinstance(
        exc,
        psycopg.DataError
        | psycopg.ProgrammingError
        | psycopg.IntegrityError
        | psycopg.NotSupportedError,
    ):
        return ContractError(
            f"{operation} on {where}: the driver refused the data ({detail})"
        )
    return _connection_lost(operation, where, detail)


def _classify(
    exc: psycopg.Error, operation: str, where: str, secrets: Sequence[str]
) -> RulvarError:
    state = exc.sqlstate or ""
    detail = _detail(exc, secrets)
    if not state:
        return _unclassified(exc, operation, where, detail)
    if state in RETRYABLE_SQLSTATES or state in _BUSY_SQLSTATES:
        return StoreBusyError(
            f"{operation} on {where}: contention outlasted its bound ({detail}); "
            "nothing was written, retry",
            operation,
        )
    if state in SCHEMA_GONE_SQLSTATES:
        # Transient by design: the next call boots the schema again.
        return StoreUnavailableError(
            f"{operation} on {where}: the store's tables or functions are gone "
            f"({detail}); the next call creates them again",
            operation,
        )
    if state.startswith(_DATA_PREFIXES):
        return ContractError(
            f"{operation} on {where}: the server refused the data ({detail})"
        )
    if state.startswith(("28", "3D")) or state == "42501":
        return ConfigError(f"{operation} on {where}: {detail}")
    if state.startswith(("08001", "08004")):
        return StoreUnavailableError(
            f"{operation} on {where}: the server did not accept the connection "
            f"({detail}); nothing was sent, retry",
            operation,
        )
    if state.startswith(_TRANSIENT_PREFIXES) or state in _TRANSIENT_STATES:
        return _connection_lost(operation, where, detail)
    return ConfigError(
        f"{operation} on {where}: the server cannot run the store's statement "
        f"({detail}); the schema or server does not match what this store expects"
    )
