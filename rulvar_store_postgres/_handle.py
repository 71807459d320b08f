"""What ``PostgresStore`` and ``AsyncPostgresStore`` share before any I/O.

One constructor (options, pool settings, plans), the boot statement and its
verdict, the closed-store refusal and the retry decisions: the two stores
differ only in how they wait (a thread or the event loop), so everything that
is not a wait lives here once.
"""

from __future__ import annotations

from typing import Final

from rulvar_store import Clock
from rulvar_store.backend import ForkGuard
from rulvar_store.errors import (
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)
from rulvar_store_postgres._calls import DRIVER_OFFERS_PREPARED_PATH, prepared_calls
from rulvar_store_postgres._config import Settings, resolve_settings
from rulvar_store_postgres._errors import no_store, retry_delay, schema_gone
from rulvar_store_postgres._plans import Plans
from rulvar_store_postgres._reads import prepared_reads
from rulvar_store_postgres._schema import Sql

__all__ = ["PostgresHandle"]

# The boot waits this long (at least) for other processes booting the same schema.
_BOOT_LOCK_TIMEOUT_MS: Final = 30_000


class PostgresHandle:
    """The options, plans and decisions of one PostgreSQL store handle, sync or async.

    A subclass builds its pool and its own wait state in ``_start``.
    """

    lease_clock: Final = "server"
    """Lease times come from the server's clock (P5; an injected ``now`` aside):
    the kit checks it from a host whose clock is wrong (``server-clock``)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        ttl_ms: int | None = None,
        pool_max_size: int | None = None,
        max_size: int | None = None,
        now: Clock | None = None,
        lock_timeout_ms: int | None = None,
        idle_in_transaction_timeout_ms: int | None = None,
        connect_timeout_s: int | None = None,
        call_timeout_ms: int | None = None,
        readonly: bool | None = None,
        prepared_statements: bool | None = None,
        replication: str | None = None,
    ) -> None:
        settings = resolve_settings(
            url,
            {
                "schema": schema,
                "ttl_ms": ttl_ms,
                "pool_max_size": pool_max_size,
                "max_size": max_size,
                "lock_timeout_ms": lock_timeout_ms,
                "idle_in_transaction_timeout_ms": idle_in_transaction_timeout_ms,
                "connect_timeout_s": connect_timeout_s,
                "call_timeout_ms": call_timeout_ms,
                "readonly": readonly,
                "prepared_statements": prepared_statements,
                "replication": replication,
            },
            injected_clock=now is not None,
        )
        self._settings = settings
        self.schema: Final = settings.schema
        self.lease_ttl_ms: Final = settings.ttl_ms
        self.pool_max_size: Final = settings.pool_max_size
        self.lock_timeout_ms: Final = settings.lock_timeout_ms
        self.idle_in_transaction_timeout_ms: Final = (
            settings.idle_in_transaction_timeout_ms
        )
        self._now = now
        self._sql = Sql(settings.schema)
        self._plans = Plans(self._sql, settings.ttl_ms, now)
        # Call text -> its prepared form (``_calls``); empty when opted out or
        # when the installed psycopg lacks what that path uses.
        prepare = settings.prepared_statements and DRIVER_OFFERS_PREPARED_PATH
        self._prepared = prepared_calls(self._sql) if prepare else {}
        # Read text -> its prepared form (``_reads``); empty alike.
        self._reads = prepared_reads(self._sql) if prepare else {}
        self._booted = False
        self._closed = False
        self._fork = ForkGuard(f"{type(self).__name__}({settings.where})")
        self._start(settings)

    def _start(self, settings: Settings) -> None:
        """Build the pool (closed) and the subclass's own state; nothing connects."""
        # Abstract: the sync and the asyncio store each build their own pool.
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._settings.where})"

    def _refuse_if_closed(self, operation: str) -> None:
        if self._closed:
            raise StoreClosedError(
                f"{operation} on {self._settings.where}: the store is closed",
                operation,
            )

    def _boot_lock_ms(self) -> int:
        return max(_BOOT_LOCK_TIMEOUT_MS, self._settings.lock_timeout_ms)

    def _boot_statement(self) -> str:
        """The whole boot as one statement (``Sql.boot``), waiting for other booters."""
        return self._sql.boot_within(self._boot_lock_ms())

    def _boot_wait_s(self) -> float:
        """How long the boot may wait for a connection: another process's boot that long."""
        return self._boot_lock_ms() / 1000

    def _booted_if_present(self, present: bool, operation: str) -> None:
        """Record a finished boot; a read-only handle on an empty schema refuses (P3)."""
        if not present:
            raise no_store(operation, self._settings.where, self.schema)
        self._booted = True

    def _busy_delay(self, exc: StoreBusyError, attempt: int) -> float:
        """How long to wait before retrying a busy mutation whole; re-raise once spent."""
        delay = retry_delay(exc, attempt)
        if delay is None:
            raise exc
        return delay

    def _note_unavailable(self, exc: StoreUnavailableError) -> None:
        if schema_gone(exc):
            self._booted = False  # the schema was dropped: boot again next time
