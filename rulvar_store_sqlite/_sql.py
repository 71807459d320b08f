"""Every runtime SQL statement of the store, one constant each (apsw caches them).

Parameters are numbered where one value is used twice. Each statement touching a
lease row pins ``owner`` and ``epoch`` in its ``WHERE`` (L7, Q8).
"""

from __future__ import annotations

import math
from typing import Final

from rulvar_store import RunFilter

BEGIN: Final = "BEGIN IMMEDIATE"
COMMIT: Final = "COMMIT"
ROLLBACK: Final = "ROLLBACK"

# -- fence (Q13) and leases --------------------------------------------------------

LIVE_LEASE_MATCHES: Final = (
    "SELECT 1 FROM leases "
    "WHERE run_id = ? AND owner = ? AND epoch = ? AND expires_at > ?"
)
LEASE_ROW: Final = "SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?"
SYNCHRONOUS_LEVEL: Final = "PRAGMA synchronous"
# PRAGMA synchronous reads back as a number; the names SQLite documents for it.
SYNCHRONOUS_NAMES: Final[dict[int, str]] = {
    0: "OFF",
    1: "NORMAL",
    2: "FULL",
    3: "EXTRA",
}
META_PAGE_FIRST: Final = "SELECT run_id, payload FROM meta ORDER BY run_id LIMIT ?"
META_PAGE_AFTER: Final = (
    "SELECT run_id, payload FROM meta WHERE run_id > ? ORDER BY run_id LIMIT ?"
)
# Bumps and returns the run's epoch in one statement: above both the tombstone and
# any lease row (L3, L5), so a counter written by another implementation or a
# lease row without its tombstone can never lead to a reissued epoch.
BUMP_EPOCH: Final = (
    "INSERT INTO epochs (run_id, epoch) "
    "VALUES (?1, 1 + coalesce((SELECT epoch FROM leases WHERE run_id = ?1), 0)) "
    "ON CONFLICT (run_id) DO UPDATE SET epoch = 1 + max(epochs.epoch, "
    "coalesce((SELECT epoch FROM leases WHERE run_id = ?1), 0)) "
    "RETURNING epoch"
)
# Takes the row only if it is absent or expired at `now` (?5), so even a caller
# that skipped the liveness check could never overwrite a live holder.
TAKE_LEASE: Final = (
    "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    "owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at "
    "WHERE leases.expires_at <= ?5"
)
# Crash-fast takeover (L11): the same take, also over the live row of a holder
# whose process is provably dead, pinned by that row's owner (?6) and epoch (?7).
TAKE_LEASE_FROM_DEAD: Final = (
    "INSERT INTO leases (run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    "owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at "
    "WHERE leases.expires_at <= ?5 OR (leases.owner = ?6 AND leases.epoch = ?7)"
)
# Who took each lease (rulvar_py_lease_holders, a table of our own that the
# reference ignores): the process identity of the epoch's holder.
HOLDER_OF: Final = (
    "SELECT process FROM rulvar_py_lease_holders WHERE run_id = ? AND epoch = ?"
)
RECORD_HOLDER: Final = (
    "INSERT INTO rulvar_py_lease_holders (run_id, epoch, process) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (run_id) DO UPDATE SET epoch = excluded.epoch, process = excluded.process"
)
FORGET_HOLDER: Final = "DELETE FROM rulvar_py_lease_holders WHERE run_id = ?"
RENEW_LEASE: Final = (
    "UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND epoch = ?"
)
RELEASE_LEASE: Final = "DELETE FROM leases WHERE run_id = ? AND owner = ? AND epoch = ?"

# -- journal -----------------------------------------------------------------------

INSERT_ENTRY: Final = "INSERT INTO entries (run_id, payload) VALUES (?, ?)"
# The A5 guard as ONE conditional insert (Q7). The CAST range is only a necessary
# condition that lets the `entries_run_seq` index narrow the scan (truncation is
# monotonic: t >= s implies CAST(t) >= CAST(s)); the decision is the exact numeric
# comparison, and only numeric stored seqs count (D5: `true` is not a seq). ?3 is
# the seq as SQLite can bind it (``seq_param``), ?4 its exact text: where the
# doubles tie, the exact comparison decides (``_exact_seq``; J6 beyond 64 bits).
INSERT_ENTRY_ABOVE_TAIL: Final = (
    "INSERT INTO entries (run_id, payload) SELECT ?1, ?2 "
    "WHERE NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ?1 "
    "AND CAST(json_extract(payload, '$.seq') AS INTEGER) >= CAST(?3 AS INTEGER) "
    "AND json_type(payload, '$.seq') IN ('integer', 'real') "
    "AND (json_extract(payload, '$.seq') > ?3 "
    "OR (json_extract(payload, '$.seq') = ?3 "
    "AND rulvar_py_seq_at_least(payload -> '$.seq', ?4))))"
)
# A leased append's fence (LIVE_LEASE_MATCHES: ?5 owner, ?6 epoch, ?7 now) and
# its A5 guard in the same conditional insert: one statement instead of two on
# the hot path. No row written says only that one of them refused; the store
# then runs the fence alone to tell which (J7: the fence's refusal comes first).
INSERT_ENTRY_FENCED_ABOVE_TAIL: Final = (
    "INSERT INTO entries (run_id, payload) SELECT ?1, ?2 "
    "WHERE EXISTS (SELECT 1 FROM leases WHERE run_id = ?1 AND owner = ?5 "
    "AND epoch = ?6 AND expires_at > ?7) "
    "AND NOT EXISTS (SELECT 1 FROM entries WHERE run_id = ?1 "
    "AND CAST(json_extract(payload, '$.seq') AS INTEGER) >= CAST(?3 AS INTEGER) "
    "AND json_type(payload, '$.seq') IN ('integer', 'real') "
    "AND (json_extract(payload, '$.seq') > ?3 "
    "OR (json_extract(payload, '$.seq') = ?3 "
    "AND rulvar_py_seq_at_least(payload -> '$.seq', ?4))))"
)
LOAD_ENTRIES: Final = "SELECT payload FROM entries WHERE run_id = ? ORDER BY id"
# load_since: the anchor row (the cursor's last entry, payload not re-sent) and
# everything after it, a range scan of entries_by_run. A missing anchor means
# the run was deleted since (ids are AUTOINCREMENT, never reused).
LOAD_ENTRIES_SINCE: Final = (
    "SELECT id, CASE WHEN id = ?2 THEN NULL ELSE payload END FROM entries "
    "WHERE run_id = ?1 AND id >= ?2 ORDER BY id"
)
DELETE_ENTRIES: Final = "DELETE FROM entries WHERE run_id = ?"

# -- meta --------------------------------------------------------------------------

UPSERT_META: Final = (
    "INSERT INTO meta (run_id, payload) VALUES (?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET payload = excluded.payload"
)
# A meta written only where the run has none (brief_put's meta_replaces=False).
INSERT_META_IF_ABSENT: Final = (
    "INSERT INTO meta (run_id, payload) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING"
)
GET_META: Final = "SELECT payload FROM meta WHERE run_id = ?"
DELETE_META: Final = "DELETE FROM meta WHERE run_id = ?"
DELETE_LEASE_ANY: Final = "DELETE FROM leases WHERE run_id = ?"
# list_runs narrows with these expressions, which match the format's indexes.
META_STATUS: Final = "json_extract(payload, '$.status')"
META_NAME: Final = "json_extract(payload, '$.name')"


def list_meta_query(
    run_filter: RunFilter | None,
) -> tuple[str, tuple[object, ...]] | None:
    """The statement and parameters narrowing ``list_runs`` in SQL (Q11).

    ``status`` OR ``statuses``, AND ``name``; tags stay for Python (D7 is
    re-applied there). ``None`` when nothing can match (``statuses=[]`` alone).
    The SQL is a superset of D7: JSON text equality is Python string equality.
    """
    clauses: list[str] = []
    params: list[object] = []
    if run_filter is not None:
        if run_filter.status is not None or run_filter.statuses is not None:
            either: list[str] = []
            if run_filter.status is not None:
                either.append(f"{META_STATUS} = ?")
                params.append(run_filter.status)
            if run_filter.statuses:
                marks = ", ".join("?" * len(run_filter.statuses))
                either.append(f"{META_STATUS} IN ({marks})")
                params.extend(run_filter.statuses)
            if not either:
                return None
            clauses.append("(" + " OR ".join(either) + ")")
        if run_filter.name is not None:
            clauses.append(f"{META_NAME} = ?")
            params.append(run_filter.name)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    return f"SELECT payload FROM meta{where} ORDER BY run_id", tuple(params)


# -- blobs -------------------------------------------------------------------------

# An overwrite sets data alone. run_id is the ref's leading segment (T3), the
# same for every write of one ref by either implementation, and naming it in SET
# would make SQLite delete and re-insert the row's blobs_by_run entry on every
# overwrite: one more index page per commit (an overwrite of a checkpoint
# pointer or a writes blob wrote 2 pages instead of 1).
UPSERT_BLOB: Final = (
    "INSERT INTO blobs (ref, run_id, data) VALUES (?, ?, ?) "
    "ON CONFLICT (ref) DO UPDATE SET data = excluded.data"
)
GET_BLOB: Final = "SELECT data FROM blobs WHERE ref = ?"
# T4: refs that start with `run_id/`, sorted. For a slashless run id those are
# exactly the rows whose leading segment (the run_id column, indexed) is run_id;
# a run id containing '/' needs the plain prefix scan.
LIST_BLOB_REFS: Final = (
    "SELECT ref FROM blobs WHERE run_id = ?1 "
    "AND substr(ref, 1, length(?1) + 1) = ?1 || '/' ORDER BY ref"
)
LIST_BLOB_REFS_BY_PREFIX: Final = "SELECT ref FROM blobs WHERE substr(ref, 1, length(?1) + 1) = ?1 || '/' ORDER BY ref"
# T12: the greatest ref in [prefix, bound), a backward scan of the ref key
# (BINARY collation: UTF-8 bytes, so code point order).
LAST_BLOB_REF: Final = (
    "SELECT ref FROM blobs WHERE ref >= ?1 AND ref < ?2 ORDER BY ref DESC LIMIT 1"
)
# brief_put's prior-ref search (L16): the least ref in [under, bound), then,
# only when that one does not match, the rest of the range in key order.
FIRST_BLOB_REF: Final = (
    "SELECT ref FROM blobs WHERE ref >= ?1 AND ref < ?2 ORDER BY ref LIMIT 1"
)
BLOB_REFS_AFTER: Final = (
    "SELECT ref FROM blobs WHERE ref > ?1 AND ref < ?2 ORDER BY ref"
)
# T13: every (ref, blob) in [prefix, bound), a forward range scan of the ref key.
BLOBS_UNDER: Final = (
    "SELECT ref, data FROM blobs WHERE ref >= ?1 AND ref < ?2 ORDER BY ref"
)
DELETE_BLOB: Final = "DELETE FROM blobs WHERE ref = ?"


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def seq_param(seq: int | float) -> int | float:
    """Bind a finite seq for SQL: int64 stays exact, anything wider becomes a float.

    SQLite itself reads JSON integers beyond int64 as REAL, so the comparison stays
    consistent with what ``json_extract`` yields for stored entries.
    """
    if isinstance(seq, int) and not _INT64_MIN <= seq <= _INT64_MAX:
        try:
            return float(seq)
        except OverflowError:
            return math.copysign(math.inf, seq)
    return seq
