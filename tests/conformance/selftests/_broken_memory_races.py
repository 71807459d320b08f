"""Realistic broken in-memory stores: ``MemoryStore`` with ONE plausible bug each.

Handles opened on one location share one domain, like the real ``memory://``
certification; ``memory_locations(cls)`` makes the ``LocationFactory``. These
stores never call failpoints, so the forced-race checks are not run for them and
the real-thread races must catch what they can.

White-box: rulvar_store._memory (the broken twins reuse the memory store's lease row and
domain, so only the seeded defect differs).
"""

from __future__ import annotations

import time
from itertools import count

from rulvar_store import (
    BlobBatch,
    BlobInput,
    Clock,
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    MemoryFencedTranscriptStore,
    MemoryStore,
    OpenedStore,
    RunMeta,
)
from rulvar_store._memory import _LeaseRow, _MemoryDomain
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    copy_blob,
    dump_record,
    finite_seq,
)


def _refuse_if_held(store: MemoryStore, run_id: str) -> int:
    """Raise if ``run_id``'s lease is live; else return now. Caller holds the lock."""
    now: int = store._now()
    row = store._domain.leases.get(run_id)
    if row is not None and row.expires_at > now:
        raise LeaseHeldError("held", run_id, row.owner, row.epoch)
    return now


def _grant(
    store: MemoryStore, run_id: str, owner: str, counter: int, epoch: int, now: int
) -> Lease:
    """Set the run's epoch counter to ``counter`` and grant ``epoch`` (lock held).

    Where the broken acquires differ is how they reached ``epoch`` and whether
    the lock was held throughout; the write itself is the honest one.
    """
    store._domain.epochs[run_id] = counter
    store._domain.leases[run_id] = _LeaseRow(owner, epoch, now + store.lease_ttl_ms)
    return Lease(run_id, owner, epoch)


class FenceThenUnlock(MemoryStore):  # type: ignore[misc]  # MemoryStore is final; the bug is the point
    """Checks the lease under the domain lock, lets go of it, then mutates."""

    def _checked(self, lease: Lease | None) -> None:
        if lease is not None:
            with self._domain.lock:
                self._assert_fencing(lease)

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self._checked(lease)
        super().append(run_id, entry, None)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self._checked(lease)
        super().put_meta(meta, None)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self._checked(lease)
        super().delete(run_id, None)

    def renew(self, lease: Lease) -> None:
        self._checked(lease)
        with self._domain.lock:
            row = self._domain.leases.get(lease.run_id)
            if row is not None:
                row.expires_at = self._now() + self.lease_ttl_ms

    def release(self, lease: Lease) -> None:
        self._checked(lease)
        with self._domain.lock:
            self._domain.leases.pop(lease.run_id, None)

    def transcripts(self) -> MemoryFencedTranscriptStore:
        return _UnlockedTwin(self)


class _UnlockedTwin(MemoryFencedTranscriptStore):  # type: ignore[misc]  # final
    def __init__(self, journal: FenceThenUnlock) -> None:
        super().__init__(journal)
        self._broken = journal

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        self._broken._checked(lease)
        data = copy_blob(blob)
        with self._domain.lock:
            self._domain.blobs[ref] = data

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self._broken._checked(lease)
        with self._domain.lock:
            self._domain.blobs.pop(ref, None)


class PerHandleEpochs(MemoryStore):  # type: ignore[misc]  # final
    """Each handle counts the epochs it issued instead of reading the shared counter."""

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]  # pass-through
        self._issued: dict[str, int] = {}

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self._domain.lock:
            now = _refuse_if_held(self, run_id)
            start = self._domain.epochs.get(run_id, 0)
            epoch = self._issued.get(run_id, start) + 1
            self._issued[run_id] = epoch
            return _grant(self, run_id, owner, max(start, epoch), epoch, now)


class ExpiredSameOwnerKeepsEpoch(MemoryStore):  # type: ignore[misc]  # final
    """Re-acquiring one's own expired lease revives it with the same epoch."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self._domain.lock:
            row = self._domain.leases.get(run_id)
            if row is not None and row.owner == owner and row.expires_at <= self._now():
                row.expires_at = self._now() + self.lease_ttl_ms
                return Lease(run_id, owner, row.epoch)
        return super().acquire(run_id, owner)


class SeqGuardThenUnlock(MemoryStore):  # type: ignore[misc]  # final
    """Compares the seq with the tail under the lock, then fences and appends anew."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        text, seq = dump_record(entry), finite_seq(entry)
        with self._domain.lock:
            journal = self._domain.entries.get(run_id, [])
            if seq is not None and any(s is not None and s >= seq for _, s in journal):
                raise JournalOrderViolation("seq not above tail", run_id, seq)
        with self._domain.lock:
            if lease is not None:
                self._assert_fencing(lease)
            self._domain.entries.setdefault(run_id, []).append((text, seq))


class PerHandleLeases(MemoryStore):  # type: ignore[misc]  # final
    """Keeps lease rows in the handle, not in the shared domain."""

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]  # pass-through
        private = _MemoryDomain()
        private.entries = self._domain.entries
        private.metas = self._domain.metas
        private.blobs = self._domain.blobs
        private.epochs = self._domain.epochs
        self._domain = private  # own leases (and own lock), shared data


class UnfencedMetaAndBlobs(MemoryStore):  # type: ignore[misc]  # final
    """Declares fenced writes but ignores the lease on put_meta and blob writes."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        super().put_meta(meta, None)

    def transcripts(self) -> MemoryFencedTranscriptStore:
        return _UnfencedTwin(self)


class _UnfencedTwin(MemoryFencedTranscriptStore):  # type: ignore[misc]  # final
    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        super().put(ref, blob, None)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        super().delete(ref, None)


class SplitBatch(MemoryStore):  # type: ignore[misc]  # final
    """put_many lands its blobs one by one, each under its own fence check (T11)."""

    def transcripts(self) -> MemoryFencedTranscriptStore:
        return _SplitBatchTwin(self)


class _SplitBatchTwin(MemoryFencedTranscriptStore):  # type: ignore[misc]  # final
    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        for ref, blob in items:
            self.put(ref, blob, lease)
            # What a per-blob commit leaves: a moment with part of the batch out.
            time.sleep(0.002)


class EpochReadThenUnlock(MemoryStore):  # type: ignore[misc]  # final
    """Reads the epoch counter under the lock, then takes the lease under it anew."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self._domain.lock:
            epoch = self._domain.epochs.get(run_id, 0) + 1
        with self._domain.lock:
            now = _refuse_if_held(self, run_id)
            return _grant(self, run_id, owner, epoch, epoch, now)


class AcquireCheckThenUnlock(MemoryStore):  # type: ignore[misc]  # final
    """Finds the run free under the lock, then takes the lease under it anew."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self._domain.lock:
            now = _refuse_if_held(self, run_id)
        with self._domain.lock:
            epoch = self._domain.epochs.get(run_id, 0) + 1
            return _grant(self, run_id, owner, epoch, epoch, now)


def memory_locations(cls: type[MemoryStore]) -> LocationFactory:
    """Fresh shared domains, every handle opened through ``cls``."""
    numbers = count()

    def fresh() -> StoreLocation:
        domain = _MemoryDomain()

        def opener(
            ttl_ms: int | None, now: Clock | None, fail_fast: bool
        ) -> OpenedStore:
            store = cls(ttl_ms=ttl_ms or 60_000, now=now, _domain=domain)
            return OpenedStore(store, store.transcripts(), (store.close,))

        return StoreLocation(
            name=f"{cls.__name__} domain {next(numbers)}",
            opener=opener,
            processes=False,
        )

    return fresh
