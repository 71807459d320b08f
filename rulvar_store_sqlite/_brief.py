"""A brief lease inside ONE transaction: acquire, the work, release, one commit.

A write outside any hold takes a lease of its own so it is refused while
another worker holds the run, and so it fences out every earlier lease (the
epoch moves). As three calls that is three commits: acquire, the write,
release. ``brief_lease_op`` runs the same steps in one ``BEGIN IMMEDIATE``
transaction: the acquire's check (a provably dead holder's live lease is
taken over, L11) and epoch bump, a lease row, the caller's
work through ``JournalInside`` and ``BlobsInside`` (reads and fenced writes on the transaction's own
cursor, the lease checked live as every leased write is), the row deleted,
COMMIT. What a reader can observe is what acquire + work + release leaves; a
failure anywhere rolls all of it back (the epoch too: nothing was written
under it).

They offer what a LangGraph saver's plans call: the journal's ``get_meta``,
``put_meta``, ``put_with_meta`` and ``delete``, and the blob twin's ``get``, ``put``, ``delete``,
``list_refs``, ``last_ref`` and ``get_under``, with the same argument rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from rulvar_store import Lease, LeaseHeldError, RunMeta
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    check_run_match,
    get_under_args,
    last_ref_args,
    load_record,
    prefix_upper_bound,
)
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._transaction import Operation

__all__ = ["BlobsInside", "BriefWork", "JournalInside", "brief_lease_op"]

T = TypeVar("T")
BriefWork = Callable[[Lease, "JournalInside", "BlobsInside"], T]
"""The work: ``(lease, journal, blobs)``, views of the running transaction."""


class _Inside:
    """The running transaction's cursor and the store's leased-write check."""

    def __init__(self, cursor: apsw.Cursor, fence: Callable[[Lease], None]) -> None:
        self._cursor = cursor
        self._fence = fence

    def _leased(self, lease: Lease | None, run_id: str, operation: str) -> None:
        # Every write here carries the brief lease: checked like any leased
        # write, so work that hands another lease (or none) is refused.
        if lease is None:
            raise LeaseHeldError(
                f"{operation} inside a brief lease must carry it", run_id, None, None
            )
        check_run_match(_intake.lease_or_none(lease, operation), run_id, operation)
        self._fence(lease)


class JournalInside(_Inside):
    """The journal's meta calls and run delete, inside the transaction."""

    def get_meta(self, run_id: str) -> RunMeta | None:
        _intake.run_id_for_read(run_id, "get_meta")
        rows = self._cursor.execute(sql.GET_META, (run_id,)).fetchall()
        return load_record(rows[0][0]) if rows else None  # type: ignore[arg-type]  # TEXT column

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        run_id, text = _intake.meta_text(meta)
        self._leased(lease, run_id, "put_meta")
        self._cursor.execute(sql.UPSERT_META, (run_id, text))

    def put_with_meta(
        self,
        ref: str,
        blob: bytes | bytearray | memoryview,
        meta: RunMeta,
        lease: Lease | None = None,
    ) -> None:
        BlobsInside(self._cursor, self._fence).put(ref, blob, lease)
        self.put_meta(meta, lease)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """The run's journal and meta; the brief lease's row goes at its end."""
        _intake.run_id_for_read(run_id, "delete")
        self._leased(lease, run_id, "delete")
        self._cursor.execute(sql.DELETE_ENTRIES, (run_id,))
        self._cursor.execute(sql.DELETE_META, (run_id,))


class BlobsInside(_Inside):
    """The blob twin's calls, inside the transaction."""

    def get(self, ref: str) -> bytes | None:
        _intake.ref_for_read(ref, "blob get")
        rows = self._cursor.execute(sql.GET_BLOB, (ref,)).fetchall()
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)
        return data

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        data = _intake.blob_bytes(blob, "blob put")
        self._leased(lease, run_id, "blob put")
        self._cursor.execute(sql.UPSERT_BLOB, (ref, run_id, data))

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        self._leased(lease, run_id, "blob delete")
        self._cursor.execute(sql.DELETE_BLOB, (ref,))

    def list_refs(self, run_id: str) -> list[str]:
        _intake.run_id_for_read(run_id, "blob list_refs")
        statement = (
            sql.LIST_BLOB_REFS_BY_PREFIX if "/" in run_id else sql.LIST_BLOB_REFS
        )
        return [str(row[0]) for row in self._cursor.execute(statement, (run_id,))]

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        _, prefix = last_ref_args(run_id, prefix)
        bound = prefix_upper_bound(prefix)
        assert bound is not None  # the prefix holds a '/', which can be raised
        rows = self._cursor.execute(sql.LAST_BLOB_REF, (prefix, bound)).fetchall()
        return str(rows[0][0]) if rows else None

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        _, prefix = get_under_args(run_id, prefix)
        bound = prefix_upper_bound(prefix)
        assert bound is not None  # the prefix holds a '/', which can be raised
        found: list[tuple[str, bytes]] = []
        for ref, data in self._cursor.execute(sql.BLOBS_UNDER, (prefix, bound)):
            assert isinstance(data, bytes)
            found.append((str(ref), data))
        return found


CheckFree = Callable[[], tuple[int, tuple[str, int] | None]]
"""The acquire's own check: raises ``LeaseHeldError`` while a live lease holds
the run; else the store's now and a provably dead holder's ``(owner, epoch)``
whose live row may be taken (L11), or ``None``."""


def brief_lease_op(
    run_id: str,
    owner: str,
    check_free: CheckFree,
    ttl_ms: int,
    fence: Callable[[Lease], None],
    work: Callable[[Lease, Any, Any], T],
) -> Operation[T]:
    """The operation of ``in_brief_lease``.

    ``check_free`` is the acquire's own check, ``fence`` the store's
    leased-write check.
    """
    _intake.run_id_for_write(run_id, "in_brief_lease")
    _intake.owner_for_write(owner, "in_brief_lease")
    now = 0
    dead: tuple[str, int] | None = None

    def check() -> None:
        nonlocal now, dead
        now, dead = check_free()

    def run(cursor: apsw.Cursor) -> T:
        epoch = cursor.execute(sql.BUMP_EPOCH, (run_id,)).fetchall()[0][0]
        assert isinstance(epoch, int)
        row = (run_id, owner, epoch, now + ttl_ms, now)
        if dead is None:
            cursor.execute(sql.TAKE_LEASE, row)
        else:
            cursor.execute(sql.TAKE_LEASE_FROM_DEAD, (*row, *dead))
        if cursor.connection.changes() != 1:
            raise LeaseHeldError(
                f"run {run_id!r} was leased concurrently", run_id, None, None
            )
        lease = Lease(run_id, owner, epoch)
        result = work(lease, JournalInside(cursor, fence), BlobsInside(cursor, fence))
        cursor.execute(sql.RELEASE_LEASE, (run_id, owner, epoch))
        return result

    return Operation("in_brief_lease", check, run)
