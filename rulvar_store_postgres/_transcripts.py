"""The fenced blob twin of a PostgresStore: same schema, same pool, same fence (T6, T7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, final

from rulvar_store import BlobInput, Lease
from rulvar_store import backend as _intake
from rulvar_store.backend import check_run_match
from rulvar_store.errors import StoreClosedError

if TYPE_CHECKING:
    from rulvar_store_postgres._store import PostgresStore

__all__ = ["PostgresFencedTranscriptStore"]


@final
class PostgresFencedTranscriptStore:
    """Blobs in ``rulvar_blobs``; leased writes take the run's lock and fence (T6).

    Obtain it from ``PostgresStore.transcripts()``; it lives and dies with that
    store: closing the store closes it; ``close()`` here leaves the shared pool to
    the store, like every twin.
    """

    fenced_writes: Literal[True] = True

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresFencedTranscriptStore({self._store!r})"

    def _mark_closed(self) -> None:
        self._closed = True

    def _ensure_open(self, operation: str) -> None:
        if self._closed:
            raise StoreClosedError(
                f"{operation}: the transcript store is closed", operation
            )

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store ``blob`` under ``ref`` (T1); a leased put is fenced on the ref's run."""
        self._ensure_open("blob put")
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        lease = _intake.lease_or_none(lease, "blob put")
        check_run_match(lease, run_id, "blob put")
        # Copied now: a later mutation must not leak in (D3).
        data = _intake.blob_bytes(blob, "blob put")
        sql = self._store._sql
        self._store._fenced(
            "blob_put", sql.blob_put, (run_id, ref, data), run_id, lease
        )

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` (T2)."""
        self._ensure_open("blob get")
        _intake.ref_for_read(ref, "blob get")
        rows = self._store._query("blob_get", self._store._sql.blob_get, (ref,))
        return None if not rows else bytes(rows[0][0])

    def list_refs(self, run_id: str) -> list[str]:
        """Return the refs under ``run_id + "/"``, sorted by code point (T4)."""
        self._ensure_open("blob list_refs")
        _intake.run_id_for_read(run_id, "blob list_refs")
        # A run id with '/' (only the reference's rows can have one) lists the refs
        # under that longer prefix, as on every backend (T4): query its run's
        # rows by the leading segment, then keep the prefix.
        prefix = run_id + "/"
        rows = self._store._query(
            "blob_list", self._store._sql.blob_list, (run_id.split("/", 1)[0],)
        )
        return sorted(ref for row in rows if (ref := str(row[0])).startswith(prefix))

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; missing is a no-op (T2); a leased delete is fenced."""
        self._ensure_open("blob delete")
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        lease = _intake.lease_or_none(lease, "blob delete")
        check_run_match(lease, run_id, "blob delete")
        sql = self._store._sql
        self._store._fenced(
            "blob_delete", sql.blob_delete, (run_id, ref), run_id, lease
        )

    def close(self) -> None:
        """Nothing to release: the pool belongs to, and closes with, the store."""
