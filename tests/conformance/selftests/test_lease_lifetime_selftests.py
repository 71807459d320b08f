"""C4 self-tests of the lease-lifetime suite: one plausible lease-time bug per check.

White-box: rulvar_store._memory (the broken twins reuse the memory store's lease row and
domain, so only the seeded defect differs).
"""

from __future__ import annotations

from typing import Final

from rulvar_store import JournalEntry, Lease, LeaseHeldError, MemoryStore
from rulvar_store._memory import _LeaseRow
from rulvar_store.backend import check_run_match, dump_record, finite_seq
from tests.conformance.selftests._broken_memory import (
    Handle,
    self_tests,
)

SUITE: Final = "lease-lifetime"


def _refuse(run_id: str, row: _LeaseRow) -> LeaseHeldError:
    return LeaseHeldError(f"run {run_id!r} is leased", run_id, row.owner, row.epoch)


class InclusiveExpiryAcquire(Handle):
    """acquire counts ``expires_at == now`` as live (``>=`` for ``>``)."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self.domain.lock:
            row = self.row(run_id)
            if row is not None and row.expires_at >= self.now():
                raise _refuse(run_id, row)
            epoch = self.domain.epochs.get(run_id, 0) + 1
            self.domain.epochs[run_id] = epoch
            expires = self.now() + self.lease_ttl_ms
            self.domain.leases[run_id] = _LeaseRow(owner, epoch, expires)
            return Lease(run_id, owner, epoch)


class InclusiveExpiryFence(Handle):
    """The fence counts ``expires_at == now`` as live (``<`` for ``<=``)."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        check_run_match(lease, run_id, "append")
        text = dump_record(entry)
        with self.domain.lock:
            if lease is not None:
                row = self.row(lease.run_id)
                if (
                    row is None
                    or row.expires_at < self.now()
                    or (row.owner, row.epoch) != (lease.owner, lease.epoch)
                ):
                    raise _refuse(run_id, row or _LeaseRow("", 0, 0))
            self.insert(run_id, text, finite_seq(entry))


class RenewAtExpiry(Handle):
    """renew accepts a lease at exactly its expiry (``expires_at < now`` refused only)."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            row = self.row(lease.run_id)
            if (
                row is None
                or row.expires_at < self.now()
                or (row.owner, row.epoch) != (lease.owner, lease.epoch)
            ):
                raise _refuse(lease.run_id, row or _LeaseRow("", 0, 0))
            row.expires_at = self.now() + self.lease_ttl_ms


class OwnRowBlocksOwner(Handle):
    """acquire refuses an owner whose own row is still there, even expired."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self.domain.lock:
            row = self.row(run_id)
            if row is not None and row.owner == owner:
                raise _refuse(run_id, row)
            return self.inner.acquire(run_id, owner)


class RenewWithDefaultTtl(Handle):
    """renew extends by the default ttl instead of the store's configured one."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            self.fence(lease)
            self.domain.leases[lease.run_id].expires_at = self.now() + 60_000


class RenewFromOldExpiry(Handle):
    """renew adds the ttl to the old expiry instead of setting now + ttl."""

    def renew(self, lease: Lease) -> None:
        with self.domain.lock:
            self.fence(lease)
            self.domain.leases[lease.run_id].expires_at += self.lease_ttl_ms


class TakeoverKeepsExpiry(Handle):
    """Taking over an expired row updates owner and epoch but not ``expires_at``."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self.domain.lock:
            row = self.row(run_id)
            if row is not None and row.expires_at > self.now():
                raise _refuse(run_id, row)
            epoch = self.domain.epochs.get(run_id, 0) + 1
            self.domain.epochs[run_id] = epoch
            if row is not None:
                row.owner, row.epoch = owner, epoch
            else:
                expires = self.now() + self.lease_ttl_ms
                self.domain.leases[run_id] = _LeaseRow(owner, epoch, expires)
            return Lease(run_id, owner, epoch)


class ReentrantAcquire(Handle):
    """The same owner may re-acquire its own live lease (a new epoch each time)."""

    def acquire(self, run_id: str, owner: str) -> Lease:
        with self.domain.lock:
            row = self.row(run_id)
            if row is not None and row.expires_at > self.now() and row.owner != owner:
                raise _refuse(run_id, row)
            epoch = self.domain.epochs.get(run_id, 0) + 1
            self.domain.epochs[run_id] = epoch
            expires = self.now() + self.lease_ttl_ms
            self.domain.leases[run_id] = _LeaseRow(owner, epoch, expires)
            return Lease(run_id, owner, epoch)


class FixedTtlReport(Handle):
    """lease_ttl_ms is hard-coded to the default, whatever the store was opened with."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.lease_ttl_ms = 60_000


class DeleteKeepsLease(Handle):
    """delete removes entries and meta but leaves the lease row (M6)."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        check_run_match(lease, run_id, "delete")
        with self.domain.lock:
            if lease is not None:
                self.fence(lease)
            self.domain.entries.pop(run_id, None)
            self.domain.metas.pop(run_id, None)


BROKEN: Final[tuple[tuple[type[Handle], str], ...]] = (
    (InclusiveExpiryAcquire, "lease-expiry-boundary"),
    (InclusiveExpiryFence, "lease-expiry-boundary"),
    (RenewAtExpiry, "lease-expiry-boundary"),
    (OwnRowBlocksOwner, "lease-dead-holder-blocks-one-ttl"),
    (RenewFromOldExpiry, "lease-renew-extends-from-now"),
    (RenewWithDefaultTtl, "lease-renew-extends-from-now"),
    (TakeoverKeepsExpiry, "lease-dead-holder-blocks-one-ttl"),
    (ReentrantAcquire, "lease-same-owner-no-reacquire"),
    (FixedTtlReport, "lease-ttl-reported"),
    (DeleteKeepsLease, "lease-delete-removes-row"),
)

SELF_TESTED: Final = frozenset(check_id for _, check_id in BROKEN)


test_broken_store_fails_the_named_check, test_honest_handle_passes = self_tests(
    [(cls, SUITE, check_id) for cls, check_id in BROKEN], "lease-time bug"
)
