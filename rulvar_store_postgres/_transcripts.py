"""The fenced blob twin of a PostgresStore: same schema, same pool, same fence (T6, T7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, final

from rulvar_store import BlobInput, Lease
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
        self._store._run(self._store._plans.blob_put(ref, blob, lease))

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` (T2)."""
        self._ensure_open("blob get")
        return self._store._run(self._store._plans.blob_get(ref))

    def list_refs(self, run_id: str) -> list[str]:
        """Return the refs under ``run_id + "/"``, sorted by code point (T4)."""
        self._ensure_open("blob list_refs")
        return self._store._run(self._store._plans.blob_list(run_id))

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; missing is a no-op (T2); a leased delete is fenced."""
        self._ensure_open("blob delete")
        self._store._run(self._store._plans.blob_delete(ref, lease))

    def close(self) -> None:
        """Nothing to release: the pool belongs to, and closes with, the store."""
