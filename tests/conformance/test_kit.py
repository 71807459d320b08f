"""The kit's own machinery: failures, wrapping, closing, threads, certification."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading

import pytest

from rulvar_conformance import (
    Certification,
    ConformanceFailure,
    ExpiryPairing,
    certification_suites,
    leasable_store_conformance,
    probe_capabilities,
    run_suites,
    suite_specs,
)
from rulvar_conformance.harness.kit import build_check, require, run_concurrently, using
from rulvar_store import (
    ConfigError,
    MemoryStore,
    MemoryTranscriptStore,
    OpenedStore,
    open_store,
)
from rulvar_store.backend import (
    CAPABILITIES,
    locations_from_factory,
    parse_store_url,
    resolve_backend,
)


def test_failure_names_the_check_and_pickles() -> None:
    """The message is ``store-conformance <id>: <detail>`` and survives pickling."""
    failure = ConformanceFailure("a2-total-order", "seqs out of order")
    assert str(failure) == "store-conformance a2-total-order: seqs out of order"
    assert isinstance(failure, AssertionError)
    copy = pickle.loads(pickle.dumps(failure))
    assert (copy.check_id, copy.detail, str(copy)) == (
        failure.check_id,
        failure.detail,
        str(failure),
    )


def test_any_exception_in_a_check_becomes_a_named_failure() -> None:
    """A violation and an unexpected error both surface as that check's failure."""
    violated = build_check("x-check", "t", ("J1",), lambda: require(False, "broken"))
    with pytest.raises(
        ConformanceFailure, match=r"^store-conformance x-check: broken$"
    ):
        violated.run()

    def explode() -> None:
        raise KeyError("boom")

    crashed = build_check("y-check", "t", ("J1",), explode)
    with pytest.raises(ConformanceFailure, match="y-check: unexpected KeyError"):
        crashed.run()


def test_using_closes_the_store_on_success_and_on_failure() -> None:
    """Stores from ``mk`` are closed either way; a close error never hides the failure."""

    class Closing:
        def __init__(self, fail_close: bool = False) -> None:
            self.closed = False
            self.fail_close = fail_close

        def close(self) -> None:
            self.closed = True
            if self.fail_close:
                raise RuntimeError("close failed")

    ok = Closing()
    with using(lambda: ok):
        pass
    assert ok.closed
    broken = Closing(fail_close=True)
    with pytest.raises(ValueError, match="body"), using(lambda: broken):
        raise ValueError("body")
    assert broken.closed


def test_concurrent_calls_start_together_and_report_each_outcome() -> None:
    """All calls pass one barrier before running; errors come back, not raised."""
    started = threading.Barrier(4)

    def meet() -> int:
        return started.wait(5)

    def fail() -> int:
        raise LookupError("nope")

    outcomes = run_concurrently([meet, meet, meet, meet])
    assert sorted(o.value for o in outcomes if o.value is not None) == [0, 1, 2, 3]
    mixed = run_concurrently([lambda: 1, fail])
    assert mixed[0].value == 1
    assert isinstance(mixed[1].error, LookupError)


def test_a_hung_concurrent_call_fails_instead_of_hanging() -> None:
    """A call still running after the timeout is reported as a violation."""
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match="did not finish"):
            run_concurrently([lambda: release.wait(30)], timeout_s=0.2)
    finally:
        release.set()


def test_expiry_and_legacy_ttl_together_are_refused() -> None:
    """Passing both pairings is ambiguous and raises ConfigError."""
    with pytest.raises(ConfigError):
        leasable_store_conformance(
            MemoryStore, expiry=ExpiryPairing(300, MemoryStore), ttl_ms=300
        )


def test_kit_imports_without_pytest() -> None:
    """``import rulvar_conformance`` works where pytest is not importable."""
    code = "import sys; sys.modules['pytest'] = None; import rulvar_conformance; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_certification_builds_the_suites_the_capabilities_call_for() -> None:
    """Journal always; leasable, fenced writes and fenced transcripts by capability."""

    def fresh(ttl_ms: int | None) -> OpenedStore:
        return open_store("memory://", ttl_ms=ttl_ms or 60_000)

    locations = locations_from_factory(fresh)
    names = [
        s.name for s in certification_suites(Certification(locations, frozenset()))
    ]
    ungated = [s.name for s in suite_specs() if s.default and s.capability is None]
    assert names == ungated
    assert names[0] == "journal"
    everything = frozenset(CAPABILITIES)
    suites = certification_suites(Certification(locations, everything))
    assert [s.name for s in suites] == [s.name for s in suite_specs() if s.default]
    assert [s.name for s in suites][:4] == [
        "journal",
        "leasable",
        "fenced-writes",
        "fenced-transcripts",
    ]
    assert {"two-handles", "forced-races", "thread-races", "typed-errors"} <= set(
        s.name for s in suites
    )
    assert "lease-ttl-and-renew-cadence" in [c.id for c in suites[1].checks]


def test_probe_reads_declared_markers() -> None:
    """The probe reports what a fresh store declares, not what a backend claims."""

    def memory(ttl_ms: int | None) -> OpenedStore:
        store = MemoryStore()
        return OpenedStore(store, store.transcripts(), (store.close,))

    def unfenced_blobs(ttl_ms: int | None) -> OpenedStore:
        store = MemoryStore()
        return OpenedStore(store, MemoryTranscriptStore(), (store.close,))

    assert probe_capabilities(locations_from_factory(memory)) == frozenset(
        {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
    )
    assert "fenced_transcripts" not in probe_capabilities(
        locations_from_factory(unfenced_blobs)
    )


@pytest.mark.clause("C2")
def test_memory_backend_certifies_through_its_registry_entry() -> None:
    """The CLI path: Backend.certify + certification_suites + run_suites, all pass."""
    url = parse_store_url("memory://")
    backend = resolve_backend(url)
    assert backend.certify is not None
    with backend.certify(url) as locations:
        classic = ["journal", "leasable", "fenced-writes", "fenced-transcripts"]
        results = run_suites(
            certification_suites(
                Certification(locations, backend.capabilities), classic
            )
        )
    assert [r.check_id for r in results if not r.passed] == []
    assert {r.suite for r in results} == set(classic)
    assert len(results) == 29
