"""Copies' abilities of the PostgreSQL store (``rulvar_store._move_rows``): rows as stored.

Every write is one transaction that takes the run's advisory lock (the key of
Appendix P, so TypeScript and Python writers queue on it too), checks the fence
against the lease clock, then writes: entries by ``COPY`` (the bulk path of a
copy), the meta and the epoch floor by upsert. Only the five tables of the
format are touched; the tombstone is an ordinary lease row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rulvar_store import Lease
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    NEVER_EXPIRES_MS,
    check_run_match,
    copy_blobs,
    copy_conflict,
    hit,
    not_live_lease,
    refuse_if_moved,
)
from rulvar_store.errors import LeaseHeldError
from rulvar_store_postgres._errors import translated
from rulvar_store_postgres._schema import LOCK_SEED, run_lock_key

if TYPE_CHECKING:
    from rulvar_store_postgres._store import PostgresStore

__all__ = [
    "entry_count",
    "entry_rows",
    "epoch_counter",
    "fence_moved",
    "meta_row",
    "orphan_page",
    "write_rows",
]

_NOW = (
    "coalesce(%s::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)"
)


def _read(
    store: PostgresStore, operation: str, query: str, args: Sequence[Any]
) -> list[Any]:
    store._fork.check(operation)
    store._ensure_booted(operation)
    settings = store._settings
    with (
        translated(operation, settings.where, settings.secrets),
        store._pool.checkout() as conn,
    ):
        return conn.execute(query, args).fetchall()


def orphan_page(
    store: PostgresStore, kind: str, after: str | None, limit: int
) -> list[str]:
    q = store._sql.quoted
    if kind == "journal":
        query = (
            f"SELECT DISTINCT run_id FROM {q}.rulvar_entries e WHERE run_id > %s "
            f"AND NOT EXISTS (SELECT 1 FROM {q}.rulvar_meta m WHERE m.run_id = e.run_id) "
            "ORDER BY run_id LIMIT %s"
        )
    else:
        query = (
            f"SELECT DISTINCT run_id FROM {q}.rulvar_blobs b WHERE run_id > %s "
            f"AND NOT EXISTS (SELECT 1 FROM {q}.rulvar_meta m WHERE m.run_id = b.run_id) "
            f"AND NOT EXISTS (SELECT 1 FROM {q}.rulvar_entries e WHERE e.run_id = b.run_id) "
            "ORDER BY run_id LIMIT %s"
        )
    rows = _read(store, "orphan_page", query, ("" if after is None else after, limit))
    return [str(row[0]) for row in rows]


def entry_rows(
    store: PostgresStore, run_id: str, after: int, limit: int
) -> list[tuple[int, str]]:
    _intake.run_id_for_read(run_id, "entry_rows")
    q = store._sql.quoted
    rows = _read(
        store,
        "entry_rows",
        f"SELECT id, payload FROM {q}.rulvar_entries WHERE run_id = %s AND id > %s "
        "ORDER BY id LIMIT %s",
        (run_id, after, limit),
    )
    return [(int(row[0]), str(row[1])) for row in rows]


def entry_count(store: PostgresStore, run_id: str) -> int:
    _intake.run_id_for_read(run_id, "entry_count")
    q = store._sql.quoted
    query = f"SELECT count(*) FROM {q}.rulvar_entries WHERE run_id = %s"
    return int(_read(store, "entry_count", query, (run_id,))[0][0])


def meta_row(store: PostgresStore, run_id: str) -> str | None:
    _intake.run_id_for_read(run_id, "meta_row")
    q = store._sql.quoted
    query = f"SELECT payload FROM {q}.rulvar_meta WHERE run_id = %s"
    rows = _read(store, "meta_row", query, (run_id,))
    return None if not rows else str(rows[0][0])


def epoch_counter(store: PostgresStore, run_id: str) -> int:
    _intake.run_id_for_read(run_id, "epoch_counter")
    q = store._sql.quoted
    query = (
        f"SELECT greatest(coalesce((SELECT epoch FROM {q}.rulvar_epochs WHERE run_id = %s), 0), "
        f"coalesce((SELECT epoch FROM {q}.rulvar_leases WHERE run_id = %s), 0))"
    )
    return int(_read(store, "epoch_counter", query, (run_id, run_id))[0][0])


def _lock(store: PostgresStore, cursor: Any, run_id: str) -> None:
    """Take the run's transaction lock (P4, the key of Appendix P)."""
    cursor.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))",
        (run_lock_key(store._sql.schema, run_id), LOCK_SEED),
    )


def _locked_and_fenced(
    store: PostgresStore, cursor: Any, run_id: str, lease: Lease | None, operation: str
) -> int:
    """Lock the run, then check the fence on the lease clock (L6, L7); return its entries.

    Without a lease the run must have no live lease: a copy never writes under
    a live owner. One statement reads the lease row and the journal's length.
    """
    _lock(store, cursor, run_id)
    q = store._sql.quoted
    cursor.execute(
        f"SELECT (SELECT count(*) FROM {q}.rulvar_entries WHERE run_id = %s), "
        f"l.owner, l.epoch, l.expires_at > {_NOW} "
        f"FROM (SELECT 1) AS one LEFT JOIN {q}.rulvar_leases AS l ON l.run_id = %s",
        (run_id, store._plans.clock(), run_id),
    )
    count, owner, epoch, live = cursor.fetchone()
    if lease is not None:
        if not (live and owner == lease.owner and epoch == lease.epoch):
            raise not_live_lease(operation, lease)
    elif live:
        refuse_if_moved(run_id, owner, epoch)
        raise LeaseHeldError(
            f"{operation} of run {run_id!r}: leased by {owner!r} (epoch {epoch})",
            run_id,
            owner,
            epoch,
        )
    return int(count)


def write_rows(
    store: PostgresStore,
    run_id: str,
    lease: Lease | None,
    expected_entries: int,
    entries: Sequence[str],
    meta: str | None,
    epoch: int,
    blobs: Sequence[tuple[str, bytes]] = (),
) -> None:
    _intake.run_id_for_write(run_id, "write_rows")
    check_run_match(_intake.lease_or_none(lease, "write_rows"), run_id, "write_rows")
    pairs = [(ref, run_id, data) for ref, data in copy_blobs(run_id, blobs)]
    store._fork.check("write_rows")
    store._ensure_booted("write_rows")
    q = store._sql.quoted
    settings = store._settings
    with (
        translated("write_rows", settings.where, settings.secrets),
        store._pool.checkout() as conn,
        conn.transaction(),
        conn.cursor() as cursor,
    ):
        found = _locked_and_fenced(store, cursor, run_id, lease, "write_rows")
        if found != expected_entries:
            raise copy_conflict(run_id, expected_entries, found)
        if entries:
            with cursor.copy(
                f"COPY {q}.rulvar_entries (run_id, payload) FROM STDIN"
            ) as copy:
                for text in entries:
                    copy.write_row((run_id, text))
        if meta is not None:
            cursor.execute(
                f"INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET payload = excluded.payload",
                (run_id, meta),
            )
        if pairs:
            cursor.executemany(
                f"INSERT INTO {q}.rulvar_blobs (ref, run_id, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (ref) DO UPDATE SET run_id = excluded.run_id, data = excluded.data",
                pairs,
            )
        if epoch > 0:
            cursor.execute(
                f"INSERT INTO {q}.rulvar_epochs AS e (run_id, epoch) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET epoch = greatest(e.epoch, excluded.epoch)",
                (run_id, epoch),
            )
        hit("write_rows", "before-commit")
    hit("write_rows", "after-commit")


def fence_moved(store: PostgresStore, lease: Lease, owner: str) -> int:
    _intake.require_lease(lease, "fence_moved")
    _intake.owner_for_write(owner, "fence_moved")
    store._fork.check("fence_moved")
    store._ensure_booted("fence_moved")
    q = store._sql.quoted
    run_id = lease.run_id
    settings = store._settings
    with (
        translated("fence_moved", settings.where, settings.secrets),
        store._pool.checkout() as conn,
        conn.transaction(),
        conn.cursor() as cursor,
    ):
        _locked_and_fenced(store, cursor, run_id, lease, "fence_moved")
        cursor.execute(
            f"INSERT INTO {q}.rulvar_epochs AS e (run_id, epoch) VALUES (%s, %s) "
            "ON CONFLICT (run_id) DO UPDATE SET epoch = greatest(e.epoch, %s) + 1 "
            "RETURNING epoch",
            (run_id, lease.epoch + 1, lease.epoch),
        )
        epoch = int(cursor.fetchone()[0])  # type: ignore[index]  # RETURNING one row
        cursor.execute(
            f"UPDATE {q}.rulvar_leases SET owner = %s, epoch = %s, expires_at = %s "
            "WHERE run_id = %s AND owner = %s AND epoch = %s",
            (owner, epoch, NEVER_EXPIRES_MS, run_id, lease.owner, lease.epoch),
        )
        if cursor.rowcount != 1:
            raise not_live_lease("fence_moved", lease)
        return epoch
