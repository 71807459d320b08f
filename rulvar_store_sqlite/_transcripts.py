"""The fenced blob twin of a ``SqliteStore``: same file, connection and lock (T6, T7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, final

import apsw

from rulvar_store import Lease
from rulvar_store import backend as _intake
from rulvar_store.backend import check_run_match
from rulvar_store_sqlite import _sql as sql

if TYPE_CHECKING:
    from rulvar_store_sqlite._store import SqliteStore

__all__ = ["SqliteFencedTranscriptStore"]


@final
class SqliteFencedTranscriptStore:
    """Blobs in the store's ``blobs`` table; leased writes are fenced like appends.

    Obtain it from ``SqliteStore.transcripts()`` (one memoized twin per store).
    Blobs and lease rows share one transactional domain, so a leased ``put`` or
    ``delete`` checks the lease and changes the blob in one ``BEGIN IMMEDIATE``
    transaction: a stale write leaves the prior blob byte-intact. Works for
    ``:memory:`` too, where a separate connection would not even see the leases.
    """

    fenced_writes: Literal[True] = True

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        """Store ``blob`` under ``ref``, overwriting in place (T1).

        Raises:
            InvalidArgumentError: a bad ref, blob or lease (``_intake`` rules).
            LeaseHeldError: the lease names another run (F2) or is not live.
        """
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        check_run_match(_intake.lease_or_none(lease, "blob put"), run_id, "blob put")
        # Copied now: a later mutation must not leak in (D3).
        data = _intake.blob_bytes(blob, "blob put")
        self._store._write(
            "blob_put",
            self._store._fence(lease),
            lambda cursor: cursor.execute(sql.UPSERT_BLOB, (ref, run_id, data)),
            atomic=True,
        )

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` for a missing ref (T2)."""
        _intake.ref_for_read(ref, "blob get")
        rows = self._store._read("blob_get", sql.GET_BLOB, (ref,))
        if not rows:
            return None
        data = rows[0][0]
        assert isinstance(data, bytes)
        return data

    def list_refs(self, run_id: str) -> list[str]:
        """Return the sorted refs that start with ``run_id + "/"`` (T4)."""
        _intake.run_id_for_read(run_id, "blob list_refs")
        statement = (
            sql.LIST_BLOB_REFS_BY_PREFIX if "/" in run_id else sql.LIST_BLOB_REFS
        )
        return [
            str(row[0]) for row in self._store._read("blob_list", statement, (run_id,))
        ]

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; a missing ref is a no-op, also under a live lease (T2).

        Raises:
            LeaseHeldError: the lease names another run (F2) or is not live.
        """
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        check_run_match(
            _intake.lease_or_none(lease, "blob delete"), run_id, "blob delete"
        )

        def remove(cursor: apsw.Cursor) -> None:
            cursor.execute(sql.DELETE_BLOB, (ref,))

        self._store._write(
            "blob_delete", self._store._fence(lease), remove, atomic=True
        )

    def close(self) -> None:
        """Nothing to do: the twin ends when its store closes (T7)."""
