"""The store SPI as protocols (CONTRACT sections 2, 3 and 5)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rulvar_store._records import BlobInput, JournalEntry, Lease, RunFilter, RunMeta

__all__ = ["JournalStore", "LeasableStore", "MetaLookupStore", "TranscriptStore"]


@runtime_checkable
class JournalStore(Protocol):
    """Per-run append-only journals plus one metadata record per run."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append ``entry`` to the run's journal atomically (J1-J3, J6, J7)."""
        ...

    def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order; ``[]`` for an unknown run (J5)."""
        ...

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the whole record of ``meta["runId"]`` (M2)."""
        ...

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return the metas matching ``run_filter`` (M4)."""
        ...

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove the run's entries, meta and lease row; keep its epoch (M6, L5)."""
        ...


@runtime_checkable
class MetaLookupStore(JournalStore, Protocol):
    """A journal store with a point lookup of one run's meta (M5)."""

    def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` when it has none."""
        ...


@runtime_checkable
class LeasableStore(JournalStore, Protocol):
    """A journal store that grants exclusive, expiring, epoch-fenced leases (L1-L10)."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with an epoch above every earlier one (L1-L3)."""
        ...

    def renew(self, lease: Lease) -> None:
        """Extend a live lease by the ttl (L6, L8)."""
        ...

    def release(self, lease: Lease) -> None:
        """Give a live lease up; its epoch can never write again (L6)."""
        ...


@runtime_checkable
class TranscriptStore(Protocol):
    """Opaque blobs keyed by ``<runId>/<rest>`` refs (T1-T5)."""

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store ``blob`` under ``ref``, overwriting in place (T1)."""
        ...

    def get(self, ref: str) -> bytes | None:
        """Return the blob, or ``None`` for a missing ref (T2)."""
        ...

    def list_refs(self, run_id: str) -> list[str]:
        """Return the sorted refs that start with ``run_id + "/"`` (T4)."""
        ...

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; a missing ref is a no-op (T2)."""
        ...
