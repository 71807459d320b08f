"""Broken stores for the kit's self-tests (C4): the in-memory store with ONE bug each.

``Handle`` is an honest handle on a shared in-memory domain (every method
delegates to a ``MemoryStore`` on that domain); a broken variant subclasses it
and overrides one method with the plausible bug, working on the same domain so
a second handle sees what the broken one did. ``locations_of(cls)`` turns a
variant into the ``LocationFactory`` the kit certifies: shared handles and an
injectable clock, exactly like the ``memory://`` backend.

White-box: rulvar_store._memory (the broken twins reuse the memory store's lease row and
domain, so only the seeded defect differs).
"""

from __future__ import annotations

from typing import Any, Final

from rulvar_conformance import (
    Certification,
    CheckResult,
    ConformanceSuite,
    certification_suites,
    run_suites,
)
from rulvar_store import (
    Clock,
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    MemoryStore,
    OpenedStore,
    RunFilter,
    RunMeta,
)
from rulvar_store._memory import _LeaseRow, _MemoryDomain
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    check_run_match,
    dump_record,
    finite_seq,
)

ALL_CAPABILITIES: Final = frozenset(
    {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
)


def held(lease: Lease) -> LeaseHeldError:
    return LeaseHeldError(
        f"lease {lease!r} is not live", lease.run_id, lease.owner, lease.epoch
    )


class Handle:
    """An honest handle on a shared memory domain; variants override one method."""

    fenced_writes: Any = True

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.domain: _MemoryDomain = inner._domain
        self.lease_ttl_ms: int = inner.lease_ttl_ms
        self._twin: Twin | None = None

    # -- helpers the variants share ---------------------------------------------

    def now(self) -> int:
        return self.inner._now()

    def fence(self, lease: Lease) -> None:
        """The honest fence (L6); callers hold ``domain.lock``."""
        self.inner._assert_fencing(lease)

    def row(self, run_id: str) -> _LeaseRow | None:
        return self.domain.leases.get(run_id)

    def insert(self, run_id: str, text: str, seq: int | float | None) -> None:
        """The honest J6 guard and insert; callers hold ``domain.lock``."""
        journal = self.domain.entries.setdefault(run_id, [])
        if seq is not None and any(s is not None and s >= seq for _, s in journal):
            raise JournalOrderViolation(f"seq {seq} not above the tail", run_id, seq)
        journal.append((text, seq))

    # -- the store ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self.inner.append(run_id, entry, lease)

    def load(self, run_id: str) -> list[JournalEntry]:
        return self.inner.load(run_id)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self.inner.put_meta(meta, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        return self.inner.get_meta(run_id)

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return self.inner.list_runs(run_filter)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self.inner.delete(run_id, lease)

    def acquire(self, run_id: str, owner: str) -> Lease:
        return self.inner.acquire(run_id, owner)

    def renew(self, lease: Lease) -> None:
        self.inner.renew(lease)

    def release(self, lease: Lease) -> None:
        self.inner.release(lease)

    def transcripts(self) -> Twin:
        if self._twin is None:
            self._twin = self.twin_class(self)
        return self._twin

    twin_class: type[Twin]

    def close(self) -> None:
        """Nothing to release."""


class Twin:
    """An honest fenced blob twin of a ``Handle``; variants override one method."""

    fenced_writes: Any = True

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.inner = handle.inner.transcripts()
        self.domain = handle.domain

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        self.inner.put(ref, blob, lease)

    def put_many(
        self, items: list[tuple[str, bytes]], lease: Lease | None = None
    ) -> None:
        self.inner.put_many(items, lease)

    def get(self, ref: str) -> bytes | None:
        return self.inner.get(ref)

    def list_refs(self, run_id: str) -> list[str]:
        return self.inner.list_refs(run_id)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self.inner.delete(ref, lease)

    def close(self) -> None:
        """Nothing to release."""


Handle.twin_class = Twin


def locations_of(handle_class: type[Handle]) -> LocationFactory:
    """Fresh shared in-memory domains whose handles are ``handle_class``."""

    def fresh() -> StoreLocation:
        domain = _MemoryDomain()

        def opener(
            ttl_ms: int | None, now: Clock | None, fail_fast: bool
        ) -> OpenedStore:
            inner = MemoryStore(ttl_ms=ttl_ms or 60_000, now=now, _domain=domain)
            handle = handle_class(inner)
            return OpenedStore(handle, handle.transcripts(), (handle.close,))

        return StoreLocation(
            name=f"broken store {handle_class.__name__}", opener=opener, processes=False
        )

    return fresh


def suite_of(handle_class: type[Handle], suite: str) -> ConformanceSuite:
    certification = Certification(locations_of(handle_class), ALL_CAPABILITIES)
    (built,) = certification_suites(certification, [suite])
    return built


def run_check(handle_class: type[Handle], suite: str, check_id: str) -> CheckResult:
    """Run one check of one registered suite against ``handle_class``."""
    check = suite_of(handle_class, suite).check(check_id)
    (result,) = run_suites([ConformanceSuite(suite, (check,))])
    return result


def assert_fails(handle_class: type[Handle], suite: str, check_id: str) -> None:
    result = run_check(handle_class, suite, check_id)
    assert result.status == "failed", (handle_class.__name__, result)
    assert (result.error or "").startswith(f"store-conformance {check_id}: ")


def assert_passes(handle_class: type[Handle], suite: str, check_id: str) -> None:
    result = run_check(handle_class, suite, check_id)
    assert result.status == "passed", (handle_class.__name__, result)


def fenced_insert(
    handle: Handle, run_id: str, entry: JournalEntry, lease: Lease | None
) -> None:
    """The honest leased append, for variants that break something around it."""
    check_run_match(lease, run_id, "append")
    text = dump_record(entry)
    with handle.domain.lock:
        if lease is not None:
            handle.fence(lease)
        handle.insert(run_id, text, finite_seq(entry))
