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

from collections.abc import Callable, Sequence

import pytest

from rulvar_conformance import (
    CheckResult,
)
from rulvar_store import (
    Clock,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    MemoryStore,
    OpenedStore,
)
from rulvar_store._memory import _LeaseRow, _MemoryDomain
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    check_run_match,
)
from tests.conformance.selftests._support import (
    MemoryStoreDelegate,
    MemoryTwinDelegate,
    check_result,
)

SelfTest = Callable[..., None]


def held(lease: Lease) -> LeaseHeldError:
    return LeaseHeldError(
        f"lease {lease!r} is not live", lease.run_id, lease.owner, lease.epoch
    )


class Handle(MemoryStoreDelegate):
    """An honest handle on a shared memory domain; variants override one method."""

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

    def transcripts(self) -> Twin:
        if self._twin is None:
            self._twin = self.twin_class(self)
        return self._twin

    twin_class: type[Twin]

    def close(self) -> None:
        """Nothing to release."""


class Twin(MemoryTwinDelegate):
    """An honest fenced blob twin of a ``Handle``; variants override one method."""

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self.inner = handle.inner.transcripts()
        self.domain = handle.domain

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


def run_check(handle_class: type[Handle], suite: str, check_id: str) -> CheckResult:
    """Run one check of one registered suite against ``handle_class``."""
    return check_result(locations_of(handle_class), suite, check_id)


def assert_fails(handle_class: type[Handle], suite: str, check_id: str) -> None:
    result = run_check(handle_class, suite, check_id)
    assert result.status == "failed", (handle_class.__name__, result)
    assert (result.error or "").startswith(f"store-conformance {check_id}: ")


def assert_passes(handle_class: type[Handle], suite: str, check_id: str) -> None:
    result = run_check(handle_class, suite, check_id)
    assert result.status == "passed", (handle_class.__name__, result)


BrokenRows = Sequence[tuple[type[Handle], str, str]]
"""(broken handle class, suite, the check id its one bug must fail)."""


def self_tests(broken: BrokenRows, bug: str) -> tuple[SelfTest, SelfTest]:
    """The two C4 tests of a module of broken handles, for it to bind at top level.

    The first runs each row's check against its broken handle and needs it to
    fail; the second, the control, runs every one of those checks against the
    honest ``Handle`` and needs it to pass, so a check that fails everything
    proves nothing. ``bug`` names the kind of bug, for the first docstring.
    """

    @pytest.mark.clause("C4")
    @pytest.mark.parametrize(
        ("broken_class", "suite", "check_id"),
        [
            pytest.param(cls, suite, check_id, id=f"{cls.__name__}-{check_id}")
            for cls, suite, check_id in broken
        ],
    )
    def test_broken_store_fails_the_named_check(
        broken_class: type[Handle], suite: str, check_id: str
    ) -> None:
        assert_fails(broken_class, suite, check_id)

    @pytest.mark.clause("C4")
    @pytest.mark.parametrize(
        ("suite", "check_id"), sorted({(suite, check) for _, suite, check in broken})
    )
    def test_honest_handle_passes(suite: str, check_id: str) -> None:
        """Control: the undamaged handle passes each of those checks."""
        assert_passes(Handle, suite, check_id)

    test_broken_store_fails_the_named_check.__doc__ = (
        f"The store with one {bug} fails the check written for that bug."
    )
    return test_broken_store_fails_the_named_check, test_honest_handle_passes


def fenced_insert(
    handle: Handle, run_id: str, text: str, seq: int | float | None, lease: Lease | None
) -> None:
    """The honest leased insert of ``text`` at ``seq``, for variants that break
    something before it (how the text is made, or which seq the guard sees)."""
    check_run_match(lease, run_id, "append")
    with handle.domain.lock:
        if lease is not None:
            handle.fence(lease)
        handle.insert(run_id, text, seq)
