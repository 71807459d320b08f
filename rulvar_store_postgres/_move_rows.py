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
    distinct_runs,
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
    "flush_writes",
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


_STATE = (
    "SELECT (SELECT count(*) FROM {q}.rulvar_entries WHERE run_id = %s), "
    "l.owner, l.epoch, l.expires_at > " + _NOW + " "
    "FROM (SELECT 1) AS one LEFT JOIN {q}.rulvar_leases AS l ON l.run_id = %s"
)


def _check_state(
    row: tuple[Any, ...], run_id: str, lease: Lease | None, operation: str
) -> int:
    """The fence on a (count, owner, epoch, live) row (L6); return the entry count.

    Without a lease the run must have no live lease: a copy never writes under
    a live owner.
    """
    count, owner, epoch, live = row
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


def _locked_and_fenced(
    store: PostgresStore, cursor: Any, run_id: str, lease: Lease | None, operation: str
) -> int:
    """Lock the run, then check the fence on the lease clock (L6, L7); return its entries."""
    # The lock is its own statement: a READ COMMITTED statement reads the
    # snapshot taken when it began, so the reads below must begin after it.
    _lock(store, cursor, run_id)
    q = store._sql.quoted
    cursor.execute(_STATE.format(q=q), (run_id, store._plans.clock(), run_id))
    return _check_state(cursor.fetchone(), run_id, lease, operation)


def write_rows(
    store: PostgresStore,
    run_id: str,
    lease: Lease | None,
    expected_entries: int,
    entries: Sequence[str],
    meta: str | None,
    epoch: int,
    blobs: Sequence[tuple[str, bytes]] = (),
    durable: bool = True,
) -> None:
    """One transaction in few round trips: lock, COPY, upserts and the checks, commit.

    The fence and the length check run after the writes, inside the same
    transaction under the run's lock: a refusal rolls everything back, so
    nothing of it is ever visible (F3), and the writes cost no extra round
    trip. ``durable=False`` commits without waiting for the WAL flush
    (``synchronous_commit=off`` for this transaction only): the copy then
    calls ``flush_writes`` before it reports the run done.
    """
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
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s)), "
            "set_config('synchronous_commit', %s, true)",
            (
                run_lock_key(store._sql.schema, run_id),
                LOCK_SEED,
                "on" if durable else "off",
            ),
        )
        if entries:
            with cursor.copy(
                f"COPY {q}.rulvar_entries (run_id, payload) FROM STDIN"
            ) as copy:
                for text in entries:
                    copy.write_row((run_id, text))
        with conn.pipeline():  # the statements below: one round trip
            _upserts(cursor, q, run_id, meta, pairs, epoch)
            cursor.execute(_STATE.format(q=q), (run_id, store._plans.clock(), run_id))
        state = cursor.fetchone()
        assert state is not None  # the SELECT returns one row
        found = _check_state(state, run_id, lease, "write_rows")
        if found != expected_entries + len(entries):
            raise copy_conflict(run_id, expected_entries, found - len(entries))
        hit("write_rows", "before-commit")
    hit("write_rows", "after-commit")


def flush_writes(store: PostgresStore) -> None:
    """A durability barrier: once it returns, every earlier commit is flushed.

    A transaction that takes a transaction id commits with a WAL record and,
    at ``synchronous_commit=on``, waits for its flush; the WAL is one sequence,
    so every commit before it is flushed too.
    """
    store._fork.check("flush_writes")
    store._ensure_booted("flush_writes")
    settings = store._settings
    with (
        translated("flush_writes", settings.where, settings.secrets),
        store._pool.checkout() as conn,
        conn.transaction(),
    ):
        conn.execute("SET LOCAL synchronous_commit = on")
        conn.execute("SELECT txid_current()")


def _upserts(
    cursor: Any,
    q: str,
    run_id: str,
    meta: str | None,
    pairs: list[tuple[str, str, bytes]],
    epoch: int,
) -> None:
    """The meta, the blobs and the epoch floor of one ``write_rows``."""
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


def write_runs(
    store: PostgresStore,
    items: Sequence[
        tuple[str, Sequence[str], str | None, int, Sequence[tuple[str, bytes]]]
    ],
    durable: bool = True,
) -> None:
    """Several new runs in ONE transaction: (run id, entries, meta, epoch, blobs) each.

    Every run's lock (taken in run id order, so two such transactions cannot
    deadlock), one COPY for all entries, the upserts, then one check: each run
    held no entries before and has no live lease, else everything rolls back
    (``CopyConflictError`` or ``LeaseHeldError``, nothing visible).
    """
    runs: list[str] = []
    entry_rows: list[tuple[str, str]] = []
    metas: list[tuple[str, str]] = []
    epochs: list[tuple[str, int]] = []
    blob_rows: list[tuple[str, str, bytes]] = []
    expected: dict[str, int] = {}
    for run_id, entries, meta, epoch, blobs in items:
        _intake.run_id_for_write(run_id, "write_runs")
        runs.append(run_id)
        expected[run_id] = len(entries)
        entry_rows.extend((run_id, text) for text in entries)
        if meta is not None:
            metas.append((run_id, meta))
        if epoch > 0:
            epochs.append((run_id, epoch))
        blob_rows.extend((ref, run_id, data) for ref, data in copy_blobs(run_id, blobs))
    distinct_runs(runs)
    store._fork.check("write_runs")
    store._ensure_booted("write_runs")
    q = store._sql.quoted
    schema = store._sql.schema
    settings = store._settings
    with (
        translated("write_runs", settings.where, settings.secrets),
        store._pool.checkout() as conn,
        conn.transaction(),
        conn.cursor() as cursor,
    ):
        cursor.execute(
            "SELECT set_config('synchronous_commit', %s, true), count(*) FROM "
            "(SELECT pg_advisory_xact_lock(hashtextextended(%s || k, %s)) FROM "
            "(SELECT k FROM unnest(%s::text[]) AS k ORDER BY k) AS ordered) AS locked",
            ("on" if durable else "off", f"{schema}:", LOCK_SEED, sorted(runs)),
        )
        if entry_rows:
            with cursor.copy(
                f"COPY {q}.rulvar_entries (run_id, payload) FROM STDIN"
            ) as copy:
                for row in entry_rows:
                    copy.write_row(row)
        with conn.pipeline():
            if metas:
                cursor.executemany(
                    f"INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (%s, %s) "
                    "ON CONFLICT (run_id) DO UPDATE SET payload = excluded.payload",
                    metas,
                )
            if blob_rows:
                cursor.executemany(
                    f"INSERT INTO {q}.rulvar_blobs (ref, run_id, data) VALUES (%s, %s, %s) "
                    "ON CONFLICT (ref) DO UPDATE SET run_id = excluded.run_id, data = excluded.data",
                    blob_rows,
                )
            if epochs:
                cursor.executemany(
                    f"INSERT INTO {q}.rulvar_epochs AS e (run_id, epoch) VALUES (%s, %s) "
                    "ON CONFLICT (run_id) DO UPDATE SET epoch = greatest(e.epoch, excluded.epoch)",
                    epochs,
                )
            cursor.execute(
                f"SELECT r, (SELECT count(*) FROM {q}.rulvar_entries e WHERE e.run_id = r), "
                f"l.owner, l.epoch, l.expires_at > {_NOW} "
                f"FROM unnest(%s::text[]) AS r LEFT JOIN {q}.rulvar_leases AS l ON l.run_id = r",
                (store._plans.clock(), runs),
            )
        for run_id, *state in cursor.fetchall():
            found = _check_state(tuple(state), run_id, None, "write_runs")
            if found != expected[run_id]:
                raise copy_conflict(run_id, 0, found - expected[run_id])
        hit("write_runs", "before-commit")
    hit("write_runs", "after-commit")
