"""C4 self-tests of the stale-surfaces suite: one plausible fence bug per check.

Each broken store is the honest in-memory store with one method rewritten the
way a store author could plausibly get it wrong; the named check must fail.

White-box: rulvar_store._memory (the broken twins reuse the memory store's lease row and
domain, so only the seeded defect differs).
"""

from __future__ import annotations

from typing import Final

from rulvar_store import JournalEntry, Lease, RunMeta
from rulvar_store._memory import _LeaseRow
from rulvar_store.backend import (
    check_run_match,
    copy_blob,
    dump_record,
    finite_seq,
    meta_run_id,
    ref_run_id,
)
from tests.conformance.selftests._broken_memory import (
    Handle,
    Twin,
    held,
    self_tests,
)

SUITE: Final = "stale-surfaces"


class FutureEpochAppend(Handle):
    """append takes a newer epoch than the row's for a fresher holder (>=)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, run_id, "append")
        text, seq = dump_record(entry), finite_seq(entry)
        with self.domain.lock:
            if lease is not None:
                row = self.row(lease.run_id)
                if (
                    row is None
                    or row.expires_at <= self.now()
                    or row.owner != lease.owner
                    or lease.epoch < row.epoch
                ):
                    raise held(lease)
            self.insert(run_id, text, seq)


class FirstMetaUnfenced(Handle):
    """put_meta fences only a run that already has meta: the FIRST write slips (F6)."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        run_id = meta_run_id(meta)
        check_run_match(lease, run_id, "put_meta")
        text = dump_record(meta)
        with self.domain.lock:
            if lease is not None and run_id in self.domain.metas:
                self.fence(lease)
            self.domain.metas[run_id] = text


class OwnerlessDelete(Handle):
    """delete checks the live row's epoch but not its owner."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        check_run_match(lease, run_id, "delete")
        with self.domain.lock:
            if lease is not None:
                row = self.row(run_id)
                if (
                    row is None
                    or row.expires_at <= self.now()
                    or row.epoch != lease.epoch
                ):
                    raise held(lease)
            self.domain.entries.pop(run_id, None)
            self.domain.metas.pop(run_id, None)
            self.domain.leases.pop(run_id, None)


class FirstBlobUnfencedTwin(Twin):
    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, ref_run_id(ref), "blob put")
        data = copy_blob(blob)
        with self.domain.lock:
            if lease is not None and ref in self.domain.blobs:
                self.handle.fence(lease)
            self.domain.blobs[ref] = data


class FirstBlobUnfenced(Handle):
    """blob put fences only an overwrite: the FIRST blob of a run slips (F6)."""

    twin_class = FirstBlobUnfencedTwin


class RowlessBlobDeleteTwin(Twin):
    def delete(self, ref: str, lease: Lease | None = None) -> None:
        check_run_match(lease, ref_run_id(ref), "blob delete")
        with self.domain.lock:
            row = None if lease is None else self.handle.row(lease.run_id)
            if lease is not None and row is not None:
                self.handle.fence(lease)
            self.domain.blobs.pop(ref, None)


class RowlessBlobDelete(Handle):
    """blob delete fences only while some lease row exists (a released run is open)."""

    twin_class = RowlessBlobDeleteTwin


class ResurrectingRenew(Handle):
    """renew upserts the lease row: a released lease comes back to life."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            if self.row(lease.run_id) is None:
                expires = self.now() + self.lease_ttl_ms
                self.domain.leases[lease.run_id] = _LeaseRow(
                    lease.owner, lease.epoch, expires
                )
                return
            self.fence(lease)
            self.domain.leases[lease.run_id].expires_at = self.now() + self.lease_ttl_ms


class UnpinnedRelease(Handle):
    """release deletes the run's lease row without checking owner and epoch (Q8)."""

    def release(self, lease: Lease) -> None:
        with self.domain.lock:
            self.domain.leases.pop(lease.run_id, None)


class ReleaseDeletesBeforeCheck(Handle):
    """release removes the run's row first and checks the lease after (no rollback)."""

    def release(self, lease: Lease) -> None:
        with self.domain.lock:
            row = self.domain.leases.pop(lease.run_id, None)
            if (
                row is None
                or row.expires_at <= self.now()
                or (row.owner, row.epoch) != (lease.owner, lease.epoch)
            ):
                raise held(lease)


class ExpiredRenew(Handle):
    """renew checks owner and epoch but not expiry: an expired lease is revived."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            row = self.row(lease.run_id)
            if row is None or row.owner != lease.owner or row.epoch != lease.epoch:
                raise held(lease)
            row.expires_at = self.now() + self.lease_ttl_ms


class RowFencedBlobPutTwin(Twin):
    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        data = copy_blob(blob)
        with self.domain.lock:
            if lease is not None:
                # The run match is skipped: the ref's own run row is checked against
                # the presented owner and epoch instead.
                self.handle.fence(Lease(ref_run_id(ref), lease.owner, lease.epoch))
            self.domain.blobs[ref] = data


class RowFencedBlobPut(Handle):
    """blob put skips the run match (F2) and fences the ref's run with the lease's numbers."""

    twin_class = RowFencedBlobPutTwin


class SeqGuardFirst(Handle):
    """append runs the seq guard before the fence (J7 order reversed)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, run_id, "append")
        text, seq = dump_record(entry), finite_seq(entry)
        with self.domain.lock:
            journal = self.domain.entries.get(run_id, [])
            if seq is not None and any(s is not None and s >= seq for _, s in journal):
                self.insert(run_id, text, seq)  # raises JournalOrderViolation
            if lease is not None:
                self.fence(lease)
            self.insert(run_id, text, seq)


BROKEN: Final[tuple[tuple[type[Handle], str], ...]] = (
    (FutureEpochAppend, "stale-append-refused"),
    (FirstMetaUnfenced, "stale-put-meta-refused"),
    (OwnerlessDelete, "stale-delete-refused"),
    (FirstBlobUnfenced, "stale-blob-put-refused"),
    (RowlessBlobDelete, "stale-blob-delete-refused"),
    (ResurrectingRenew, "stale-renew-refused"),
    (UnpinnedRelease, "stale-release-refused"),
    (ReleaseDeletesBeforeCheck, "stale-release-refused"),
    (ExpiredRenew, "stale-expired-every-surface"),
    (RowFencedBlobPut, "stale-cross-run-every-surface"),
    (SeqGuardFirst, "stale-lease-before-seq-guard"),
)

SELF_TESTED: Final = frozenset(check_id for _, check_id in BROKEN)


test_broken_store_fails_the_named_check, test_honest_handle_passes = self_tests(
    [(cls, SUITE, check_id) for cls, check_id in BROKEN], "fence bug"
)
