"""C4 self-tests of the original checks that tests/conformance/test_kit_self_tests.py
does not break: one plausible bug per check, each the in-memory store with one
method rewritten, certified through the registry like any backend."""

from __future__ import annotations

import time
from typing import Any, Final

from rulvar_store import JournalEntry, Lease, LeaseHeldError, RunMeta
from rulvar_store.backend import (
    check_run_match,
    copy_blob,
    dump_record,
    finite_seq,
    load_record,
    meta_run_id,
    ref_run_id,
)
from tests.conformance.selftests._broken_memory import (
    Handle,
    Twin,
    held,
    self_tests,
)

# The window a check-then-insert store leaves open; both racers of the kit's
# race checks start together, so both pass the check inside it.
RACE_WINDOW_S: Final = 0.5


class StaleReadCache(Handle):
    """load caches each run's journal; append forgets to invalidate it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.cache: dict[str, list[str]] = {}

    def load(self, run_id: str) -> list[JournalEntry]:
        if run_id not in self.cache:
            self.cache[run_id] = [dump_record(e) for e in self.inner.load(run_id)]
        return [load_record(text) for text in self.cache[run_id]]

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self.cache.pop(run_id, None)
        self.inner.delete(run_id, lease)


class FalsyRefDropped(Handle):
    """append drops ``ref`` when it is falsy (``if entry.get('ref')``): ref 0 is lost."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        kept = {k: v for k, v in entry.items() if k != "ref" or v}
        self.inner.append(run_id, kept, lease)


class CheckThenInsert(Handle):
    """The seq guard reads the tail, lets go of the lock, then inserts (J6 race)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, run_id, "append")
        text, seq = dump_record(entry), finite_seq(entry)
        with self.domain.lock:
            if lease is not None:
                self.fence(lease)
            self.insert(run_id, text, seq)  # the check ...
            self.domain.entries[run_id].pop()
        time.sleep(RACE_WINDOW_S)
        with self.domain.lock:
            self.domain.entries.setdefault(run_id, []).append(
                (text, seq)
            )  # ... the act


class MergingPutMeta(Handle):
    """put_meta merges into the stored record instead of replacing it (M2)."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        old = self.inner.get_meta(meta_run_id(meta)) or {}
        self.inner.put_meta({**old, **meta}, lease)


class EpochResetOnDelete(Handle):
    """delete also drops the epoch counter, so epochs restart at 1 (L5)."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        with self.domain.lock:
            self.inner.delete(run_id, lease)
            self.domain.epochs.pop(run_id, None)


class NoopRelease(Handle):
    """release checks the lease and then forgets to remove the row."""

    def release(self, lease: Lease) -> None:
        with self.domain.lock:
            self.fence(lease)


class NoopRenew(Handle):
    """renew checks the lease and then forgets to extend it."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            self.fence(lease)


class Unmarked(Handle):
    """A fenced journal that forgot to declare ``fenced_writes = True``."""

    fenced_writes = None


class UnmarkedTwin(Twin):
    fenced_writes = None


class UnmarkedBlobs(Handle):
    """A fenced blob twin that forgot to declare the marker."""

    twin_class = UnmarkedTwin


class UnfencedDelete(Handle):
    """delete ignores the lease it is given."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self.inner.delete(run_id)


class OwnerOnlyMetaFence(Handle):
    """put_meta fences by owner only: a same-owner zombie epoch passes."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        run_id = meta_run_id(meta)
        check_run_match(lease, run_id, "put_meta")
        text = dump_record(meta)
        with self.domain.lock:
            row = None if lease is None else self.row(run_id)
            if lease is not None and (
                row is None or row.expires_at <= self.now() or row.owner != lease.owner
            ):
                raise held(lease)
            self.domain.metas[run_id] = text


class RunMatchSkippedMeta(Handle):
    """put_meta fences the lease's own run and never compares it with meta's runId."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        text = dump_record(meta)
        with self.domain.lock:
            if lease is not None:
                self.fence(lease)
            self.domain.metas[meta_run_id(meta)] = text


class LeaseRequiredPutMeta(Handle):
    """A fenced store that refuses every put_meta without a lease (F4)."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        if lease is None:
            raise LeaseHeldError(
                "put_meta needs a lease", meta_run_id(meta), None, None
            )
        self.inner.put_meta(meta, lease)


class UnfencedBlobDeleteTwin(Twin):
    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self.inner.delete(ref)


class UnfencedBlobDelete(Handle):
    """blob delete ignores the lease it is given."""

    twin_class = UnfencedBlobDeleteTwin


class RunMatchSkippedBlobTwin(Twin):
    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        data = copy_blob(blob)
        with self.domain.lock:
            if lease is not None:
                self.handle.fence(lease)
            self.domain.blobs[ref] = data

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        with self.domain.lock:
            if lease is not None:
                self.handle.fence(lease)
            self.domain.blobs.pop(ref, None)


class RunMatchSkippedBlob(Handle):
    """Blob writes fence the lease's own run and never compare it with the ref's run."""

    twin_class = RunMatchSkippedBlobTwin


class LeasedOnlyBlobDeleteTwin(Twin):
    def delete(self, ref: str, lease: Lease | None = None) -> None:
        if lease is not None:
            check_run_match(lease, ref_run_id(ref), "blob delete")
            self.inner.delete(ref, lease)


class LeasedOnlyBlobDelete(Handle):
    """An unleased blob delete silently does nothing."""

    twin_class = LeasedOnlyBlobDeleteTwin


class UnfencedBatchTwin(Twin):
    def put_many(
        self, items: list[tuple[str, bytes]], lease: Lease | None = None
    ) -> None:
        self.inner.put_many(items)


class UnfencedBatch(Handle):
    """put_many checks the run match but never the lease's liveness (T11)."""

    twin_class = UnfencedBatchTwin


class PartialBatchTwin(Twin):
    def put_many(
        self, items: list[tuple[str, bytes]], lease: Lease | None = None
    ) -> None:
        for ref, blob in items:
            self.inner.put(ref, blob, lease)


class PartialBatch(Handle):
    """put_many is a loop of puts: a bad item late in the batch strands the earlier ones."""

    twin_class = PartialBatchTwin


BROKEN: Final[tuple[tuple[type[Handle], str, str], ...]] = (
    (StaleReadCache, "journal", "a3-read-your-writes"),
    (CheckThenInsert, "journal", "a5-stale-tail-race"),
    (CheckThenInsert, "journal", "a5-stale-replayer-fencing"),
    (MergingPutMeta, "journal", "meta-separation"),
    (FalsyRefDropped, "journal", "golden-fold-state"),
    (FalsyRefDropped, "journal", "decide-once-oracle"),
    (FalsyRefDropped, "journal", "abandon-derived-skip"),
    (EpochResetOnDelete, "leasable", "fencing-epoch-tombstone"),
    (NoopRelease, "leasable", "lease-release-fences"),
    (NoopRenew, "leasable", "lease-ttl-and-renew-cadence"),
    (Unmarked, "fenced-writes", "fenced-marker-declared"),
    (UnfencedDelete, "fenced-writes", "fenced-delete-stale-rejected"),
    (OwnerOnlyMetaFence, "fenced-writes", "fenced-tombstone-zombie-rejected"),
    (RunMatchSkippedMeta, "fenced-writes", "fenced-run-match"),
    (LeaseRequiredPutMeta, "fenced-writes", "fenced-unleased-passthrough"),
    (UnmarkedBlobs, "fenced-transcripts", "fenced-transcripts-marker-declared"),
    (
        UnfencedBlobDelete,
        "fenced-transcripts",
        "fenced-transcripts-stale-delete-rejected",
    ),
    (RunMatchSkippedBlob, "fenced-transcripts", "fenced-transcripts-run-match"),
    (
        LeasedOnlyBlobDelete,
        "fenced-transcripts",
        "fenced-transcripts-unleased-passthrough",
    ),
    (UnfencedBatch, "fenced-transcripts", "fenced-transcripts-batch-stale-refused"),
    (PartialBatch, "fenced-transcripts", "fenced-transcripts-batch-arguments"),
)

SELF_TESTED: Final = frozenset(check_id for _, _, check_id in BROKEN)


test_broken_store_fails_the_named_check, test_honest_handle_passes = self_tests(
    BROKEN, "bug"
)
