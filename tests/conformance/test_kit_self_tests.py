"""C4 kit self-tests: deliberately broken stores fail exactly the named check.

Each broken store wraps an honest ``MemoryStore`` by delegation and breaks one
obligation; the check named for that obligation must raise a
``ConformanceFailure`` carrying its id, while the honest store passes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from rulvar_conformance import (
    ConformanceFailure,
    ConformanceSuite,
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
    fenced_writes_conformance,
    journal_store_conformance,
    leasable_store_conformance,
    run_suites,
)
from rulvar_store import (
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    MemoryFencedTranscriptStore,
    MemoryStore,
    RunMeta,
)
from tests.conformance.selftests._support import MemoryStoreDelegate, MemoryTwinDelegate


class DelegatingStore(MemoryStoreDelegate):
    """A MemoryStore seen through a wrapper; subclasses break one method."""

    def __init__(self, ttl_ms: int = 600_000) -> None:
        self.inner = MemoryStore(ttl_ms=ttl_ms)
        self.lease_ttl_ms = self.inner.lease_ttl_ms
        self.closed = False

    def close(self) -> None:
        self.closed = True


class ReorderingLoad(DelegatingStore):
    def load(self, run_id: str) -> list[JournalEntry]:
        return list(reversed(self.inner.load(run_id)))


class InjectingLoad(DelegatingStore):
    def load(self, run_id: str) -> list[JournalEntry]:
        return [{"hashVersion": 2, **entry} for entry in self.inner.load(run_id)]


class TruncatingLoad(DelegatingStore):
    def load(self, run_id: str) -> list[JournalEntry]:
        entries = self.inner.load(run_id)
        for entry in entries:
            value = entry.get("value")
            if isinstance(value, dict) and isinstance(value.get("blob"), str):
                value["blob"] = value["blob"][:4096]
        return entries


class UnfencedAppend(DelegatingStore):
    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self.inner.append(run_id, entry)


class UnfencedPutMeta(DelegatingStore):
    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self.inner.put_meta(meta)


class DoubleGrant(DelegatingStore):
    def acquire(self, run_id: str, owner: str) -> Lease:
        try:
            return self.inner.acquire(run_id, owner)
        except LeaseHeldError:
            return Lease(run_id, owner, 999)


class SilentSeqGuard(DelegatingStore):
    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        with contextlib.suppress(JournalOrderViolation):
            self.inner.append(run_id, entry, lease)


class UnfencedBlobPut(MemoryTwinDelegate):
    """A fenced twin whose ``put`` drops the lease."""

    def __init__(self, twin: MemoryFencedTranscriptStore) -> None:
        self.inner = twin

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        self.inner.put(ref, blob)


def unfenced_blob_pair() -> FencedTranscriptsFixture:
    store = MemoryStore(ttl_ms=600_000)
    return FencedTranscriptsFixture(store, UnfencedBlobPut(store.transcripts()))


def journal(cls: type[DelegatingStore]) -> ConformanceSuite:
    return journal_store_conformance(cls)


def leasable(cls: type[DelegatingStore]) -> ConformanceSuite:
    return leasable_store_conformance(cls)


def fenced(cls: type[DelegatingStore]) -> ConformanceSuite:
    return fenced_writes_conformance(cls)


CASES: list[tuple[str, Callable[[], ConformanceSuite], str]] = [
    ("reordering-load", lambda: journal(ReorderingLoad), "a2-total-order"),
    ("load-injects-hashVersion", lambda: journal(InjectingLoad), "a4-opaque-payload"),
    ("load-truncates-payload", lambda: journal(TruncatingLoad), "a1-append-atomicity"),
    ("silent-seq-guard", lambda: journal(SilentSeqGuard), "a5-monotonic-seq"),
    (
        "append-ignores-stale-lease",
        lambda: leasable(UnfencedAppend),
        "fencing-stale-epoch",
    ),
    ("acquire-double-grants", lambda: leasable(DoubleGrant), "lease-exclusive-acquire"),
    (
        "put-meta-ignores-fence",
        lambda: fenced(UnfencedPutMeta),
        "fenced-meta-stale-rejected",
    ),
    (
        "blob-put-ignores-fence",
        lambda: fenced_transcripts_conformance(unfenced_blob_pair),
        "fenced-transcripts-stale-put-rejected",
    ),
]

SELF_TESTED = frozenset(check_id for _, _, check_id in CASES)
"""Check ids proven against a broken store here (read by test_self_test_coverage)."""


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("build", "check_id"),
    [pytest.param(build, check_id, id=name) for name, build, check_id in CASES],
)
def test_broken_store_fails_the_named_check(
    build: Callable[[], ConformanceSuite], check_id: str
) -> None:
    """The check named for the broken obligation raises a failure carrying its id."""
    check = build().check(check_id)
    with pytest.raises(ConformanceFailure) as caught:
        check.run()
    assert caught.value.check_id == check_id
    assert str(caught.value).startswith(f"store-conformance {check_id}: ")


@pytest.mark.clause("C4")
@pytest.mark.parametrize("check_id", [check_id for _, _, check_id in CASES[:6]])
def test_honest_wrapper_passes_the_same_check(check_id: str) -> None:
    """Control: the undamaged delegating wrapper passes each of those checks."""
    suites = [journal(DelegatingStore), leasable(DelegatingStore)]
    check = next(
        s.check(check_id) for s in suites if check_id in [c.id for c in s.checks]
    )
    check.run()


@pytest.mark.clause("C4")
def test_suite_run_stops_at_the_first_violation() -> None:
    """``suite.run()`` raises the first failing check (reordering breaks a1 first)."""
    with pytest.raises(ConformanceFailure) as caught:
        journal(ReorderingLoad).run()
    assert caught.value.check_id == "a1-append-atomicity"


@pytest.mark.clause("C4")
def test_run_suites_reports_every_check_and_keeps_going() -> None:
    """``run_suites`` runs past failures and reports one result per check."""
    suites = [journal(InjectingLoad), leasable(UnfencedAppend)]
    seen: list[str] = []
    results = run_suites(suites, on_result=lambda result: seen.append(result.check_id))
    assert [r.check_id for r in results] == seen
    assert len(results) == sum(len(suite.checks) for suite in suites)
    failed = {r.check_id: r for r in results if not r.passed}
    assert set(failed) == {
        "a4-opaque-payload",
        "fencing-stale-epoch",
        "fencing-epoch-tombstone",
        "lease-release-fences",
    }
    assert failed["a4-opaque-payload"].suite == "journal"
    error = failed["a4-opaque-payload"].error or ""
    assert error.startswith("store-conformance a4-opaque-payload: ")
    assert all(r.error is None and r.duration_ms >= 0 for r in results if r.passed)


@pytest.mark.clause("C1")
def test_every_store_the_kit_opens_is_closed_even_on_failure() -> None:
    """Checks close each store they take from ``mk``, failing checks included."""
    made: list[DelegatingStore] = []

    def tracked(cls: type[DelegatingStore]) -> Callable[[], Any]:
        def mk() -> DelegatingStore:
            made.append(cls())
            return made[-1]

        return mk

    suites = [
        journal_store_conformance(tracked(ReorderingLoad)),
        leasable_store_conformance(tracked(UnfencedAppend)),
        fenced_writes_conformance(tracked(UnfencedPutMeta)),
    ]
    results = run_suites(suites)
    assert any(not result.passed for result in results)
    assert len(made) >= len(results)
    assert all(store.closed for store in made)
