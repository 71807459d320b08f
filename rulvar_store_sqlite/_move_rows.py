"""Copies' abilities of the SQLite store (``rulvar_store._move_rows``): rows as stored.

Reads go through the store's door like every read; writes are one ``Operation``
each, so they take the same ``BEGIN IMMEDIATE`` transaction, fence check and
group commit as every other write (Q6). Only the five tables of Appendix S are
touched; the tombstone is an ordinary lease row.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Final

import apsw

from rulvar_store import Lease
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    NEVER_EXPIRES_MS,
    check_run_match,
    copy_blobs,
    copy_conflict,
    refuse_if_moved,
)
from rulvar_store.errors import LeaseHeldError
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._transaction import Operation

if TYPE_CHECKING:
    from rulvar_store_sqlite._store import SqliteStore

__all__ = [
    "entry_count",
    "entry_rows",
    "epoch_counter",
    "fence_moved_op",
    "meta_row",
    "orphan_page",
    "write_rows_op",
]

ENTRY_ROWS: Final = (
    "SELECT id, payload FROM entries WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?"
)
ENTRY_COUNT: Final = "SELECT count(*) FROM entries WHERE run_id = ?"
EPOCH_COUNTER: Final = (
    "SELECT max(coalesce((SELECT epoch FROM epochs WHERE run_id = ?1), 0), "
    "coalesce((SELECT epoch FROM leases WHERE run_id = ?1), 0))"
)
RAISE_EPOCH: Final = (
    "INSERT INTO epochs (run_id, epoch) VALUES (?1, ?2) "
    "ON CONFLICT (run_id) DO UPDATE SET epoch = max(epochs.epoch, excluded.epoch)"
)
UPSERT_BLOB: Final = (
    "INSERT INTO blobs (ref, run_id, data) VALUES (?, ?, ?) "
    "ON CONFLICT (ref) DO UPDATE SET run_id = excluded.run_id, data = excluded.data"
)
TOMBSTONE: Final = (
    "UPDATE leases SET owner = ?, epoch = ?, expires_at = ? "
    "WHERE run_id = ? AND owner = ? AND epoch = ?"
)


ORPHAN_JOURNALS: Final = (
    "SELECT DISTINCT run_id FROM entries e WHERE run_id > ? "
    "AND NOT EXISTS (SELECT 1 FROM meta m WHERE m.run_id = e.run_id) "
    "ORDER BY run_id LIMIT ?"
)
ORPHAN_BLOBS: Final = (
    "SELECT DISTINCT run_id FROM blobs b WHERE run_id > ? "
    "AND NOT EXISTS (SELECT 1 FROM meta m WHERE m.run_id = b.run_id) "
    "AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.run_id = b.run_id) "
    "ORDER BY run_id LIMIT ?"
)


def orphan_page(
    store: SqliteStore, kind: str, after: str | None, limit: int
) -> list[str]:
    query = ORPHAN_JOURNALS if kind == "journal" else ORPHAN_BLOBS
    rows = store._door.read(
        "orphan_page", query, ("" if after is None else after, limit)
    )
    return [str(row[0]) for row in rows]


def entry_rows(
    store: SqliteStore, run_id: str, after: int, limit: int
) -> list[tuple[int, str]]:
    _intake.run_id_for_read(run_id, "entry_rows")
    rows = store._door.read("entry_rows", ENTRY_ROWS, (run_id, after, limit))
    return [(int(row[0]), str(row[1])) for row in rows]  # type: ignore[arg-type]  # INTEGER column


def entry_count(store: SqliteStore, run_id: str) -> int:
    _intake.run_id_for_read(run_id, "entry_count")
    return int(store._door.read("entry_count", ENTRY_COUNT, (run_id,))[0][0])  # type: ignore[arg-type]  # INTEGER column


def meta_row(store: SqliteStore, run_id: str) -> str | None:
    _intake.run_id_for_read(run_id, "meta_row")
    rows = store._door.read("meta_row", sql.GET_META, (run_id,))
    return None if not rows else str(rows[0][0])


def epoch_counter(store: SqliteStore, run_id: str) -> int:
    _intake.run_id_for_read(run_id, "epoch_counter")
    return int(store._door.read("epoch_counter", EPOCH_COUNTER, (run_id,))[0][0])  # type: ignore[arg-type]  # INTEGER column


def write_rows_op(
    store: SqliteStore,
    run_id: str,
    lease: Lease | None,
    expected_entries: int,
    entries: Sequence[str],
    meta: str | None,
    epoch: int,
    blobs: Sequence[tuple[str, bytes]] = (),
) -> Operation[None]:
    _intake.run_id_for_write(run_id, "write_rows")
    check_run_match(_intake.lease_or_none(lease, "write_rows"), run_id, "write_rows")
    texts = [(run_id, text) for text in entries]
    pairs = [(ref, run_id, data) for ref, data in copy_blobs(run_id, blobs)]

    def mutate(cursor: apsw.Cursor) -> None:
        found = int(cursor.execute(ENTRY_COUNT, (run_id,)).fetchall()[0][0])  # type: ignore[arg-type]  # INTEGER column
        if found != expected_entries:
            raise copy_conflict(run_id, expected_entries, found)
        if texts:
            cursor.executemany(sql.INSERT_ENTRY, texts)
        if meta is not None:
            cursor.execute(sql.UPSERT_META, (run_id, meta))
        if pairs:
            cursor.executemany(UPSERT_BLOB, pairs)
        if epoch > 0:
            cursor.execute(RAISE_EPOCH, (run_id, epoch))

    fence = store._fence(lease) or partial(_refuse_live, store, run_id)
    return Operation("write_rows", fence, mutate)


def _refuse_live(store: SqliteStore, run_id: str) -> None:
    """An unleased copy write never lands under a live owner (``write_rows``)."""
    rows = store._cursor.execute(sql.LEASE_ROW, (run_id,)).fetchall()
    if rows and rows[0][2] > store._now():  # type: ignore[operator]  # INTEGER column
        owner, epoch = str(rows[0][0]), int(rows[0][1])  # type: ignore[arg-type]  # INTEGER column
        refuse_if_moved(run_id, owner, epoch)
        raise LeaseHeldError(
            f"write_rows of run {run_id!r}: leased by {owner!r} (epoch {epoch})",
            run_id,
            owner,
            epoch,
        )


def fence_moved_op(store: SqliteStore, lease: Lease, owner: str) -> Operation[int]:
    _intake.require_lease(lease, "fence_moved")
    _intake.owner_for_write(owner, "fence_moved")

    def mutate(cursor: apsw.Cursor) -> int:
        epoch = cursor.execute(sql.BUMP_EPOCH, (lease.run_id,)).fetchall()[0][0]
        assert isinstance(epoch, int)
        cursor.execute(
            TOMBSTONE,
            (owner, epoch, NEVER_EXPIRES_MS, lease.run_id, lease.owner, lease.epoch),
        )
        if store._conn.changes() != 1:  # the fence passed: cannot happen
            raise LeaseHeldError(
                f"run {lease.run_id!r}: the lease row changed under its fence",
                lease.run_id,
                lease.owner,
                lease.epoch,
            )
        return epoch

    return Operation("fence_moved", store._fence(lease), mutate)
