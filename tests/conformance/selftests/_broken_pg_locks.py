"""Broken PostgreSQL stores whose run lock key is wrong (issue 22, class 5).

The honest store locks ``hashtextextended('<schema>:<runId>', 8214)`` inside
each operation function. Two plausible ways to get that key wrong:

- ``SchemaBlindLockKey`` hashes the run id alone: correct for one schema, but
  every schema on the server now queues on one lock per run id, so a stranger
  holding ``run-1`` in its window holds up ``run-1`` here;
- ``ProcessHashLockKey`` takes the lock in the calling statement with a key
  from Python's ``hash()`` (randomized per interpreter by ``PYTHONHASHSEED``):
  handles of one process agree, a second process locks another key and the
  run's writers no longer exclude each other.

Each keeps the server functions otherwise verbatim; a changed function text
gets its own digest, so a schema booted by one variant is never mistaken for
another's. Open them through ``pg_lock_locations``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, ClassVar

from rulvar_store.backend import LocationFactory
from rulvar_store_postgres import PostgresStore
from rulvar_store_postgres._plans import Plans
from rulvar_store_postgres._schema import LOCK_SEED, Sql, lock_call
from tests.conformance.selftests._broken_postgres import schema_locations

__all__ = ["ProcessHashLockKey", "SchemaBlindLockKey", "pg_lock_locations"]

_CALLS = ("append", "put_meta", "delete", "acquire", "renew", "release")
_BLOB_CALLS = ("blob_put", "blob_delete")


def _honest_lock(schema: str) -> str:
    # The lock expression inside each function's first assignment (``_schema``).
    return lock_call(schema)


def _rewrite_boot(sql: Sql, lock: str) -> None:
    """Put ``lock`` where the functions take their run lock; re-digest the boot."""
    honest = _honest_lock(sql.schema)
    assert honest in sql.boot, "the honest run lock moved: update this seed"
    old_digest = sql.functions_digest
    boot = sql.boot.replace(honest, lock)
    digest = hashlib.sha256(boot.encode()).hexdigest()[:32]
    sql.boot = boot.replace(old_digest, digest)
    sql.functions_digest = digest


def _use_sql(store: PostgresStore, sql: Sql) -> None:
    """Make ``store`` send ``sql`` (its plans are rebuilt over it)."""
    store._sql = sql
    store._plans = Plans(sql, store.lease_ttl_ms, store._now)


class SchemaBlindLockKey(PostgresStore):  # type: ignore[misc]  # final; the bug is the point
    """Locks ``hashtextextended(<runId>)``: the schema is left out of the key."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        sql = Sql(self.schema)
        blind = f"pg_advisory_xact_lock(hashtextextended(p_run, {LOCK_SEED}))"
        _rewrite_boot(sql, blind)
        _use_sql(self, sql)


class ProcessHashLockKey(PostgresStore):  # type: ignore[misc]  # final; the bug is the point
    """Locks a key from this interpreter's ``hash()``, taken by the calling statement."""

    _KEY_MASK: ClassVar[int] = (1 << 63) - 1

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        sql = Sql(self.schema)
        # A void that takes nothing: the caller's statement took the lock.
        _rewrite_boot(sql, "pg_sleep(0)")
        for name in (*_CALLS, *_BLOB_CALLS):
            call: str = getattr(sql, name)
            # A function in FROM runs before the select list: lock, then the call.
            setattr(sql, name, call + " FROM pg_advisory_xact_lock(%s::bigint) AS k")
        _use_sql(self, sql)

    def _mutate(self, operation: str, call: str, args: Sequence[Any]) -> int:
        key = hash((self.schema, args[0])) & self._KEY_MASK
        result: int = super()._mutate(operation, call, (*args, key))
        return result


def pg_lock_locations(
    url: str, store: type[SchemaBlindLockKey | ProcessHashLockKey]
) -> tuple[LocationFactory, list[str]]:
    """Fresh schemas opened through ``store``; the schema names made, to drop after."""
    return schema_locations(url, store, "kit22_lockkey")
