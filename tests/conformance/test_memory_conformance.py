"""The honest MemoryStore passes all four suites, run as pytest items (C2, C4)."""

from __future__ import annotations

import pytest

from rulvar_conformance import (
    ConformanceCheck,
    ConformanceSuite,
    ExpiryPairing,
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
    fenced_writes_conformance,
    journal_store_conformance,
    leasable_store_conformance,
    pytest_params,
)
from rulvar_store import MemoryStore


def memory(ttl_ms: int = 60_000) -> MemoryStore:
    return MemoryStore(ttl_ms=ttl_ms)


def memory_pair() -> FencedTranscriptsFixture:
    store = memory(600_000)
    return FencedTranscriptsFixture(journal=store, transcripts=store.transcripts())


SUITES: list[ConformanceSuite] = [
    journal_store_conformance(memory),
    leasable_store_conformance(
        lambda: memory(600_000), expiry=ExpiryPairing(600, lambda: memory(600))
    ),
    fenced_writes_conformance(lambda: memory(600_000)),
    fenced_transcripts_conformance(memory_pair),
]


@pytest.mark.parametrize(
    "check", [param for suite in SUITES for param in pytest_params(suite)]
)
def test_honest_memory_store_passes_every_kit_check(check: ConformanceCheck) -> None:
    """Positive control: the fenced in-memory reference store passes each check."""
    check.run()


@pytest.mark.clause("C2")
def test_suites_run_standalone_without_pytest_machinery() -> None:
    """``suite.run()`` runs every check of the journal suite in order and returns."""
    journal_store_conformance(memory).run()


@pytest.mark.clause("C2")
def test_pytest_params_carry_check_ids_and_clause_marks() -> None:
    """Each param is the check itself, id'd by check id, marked with its clauses."""
    suite = fenced_writes_conformance(memory)
    params = pytest_params(suite)
    assert [param.id for param in params] == [check.id for check in suite.checks]
    for param, check in zip(params, suite.checks, strict=True):
        assert param.values == (check,)
        marks = [(mark.name, mark.args) for mark in param.marks]
        assert marks == [("clause", (clause,)) for clause in check.clauses]


def test_check_ids_match_the_contract_tables() -> None:
    """The suites expose exactly the check ids of CONTRACT 8.2, 8.3, 8.5 and 8.6."""
    ids = {suite.name: [check.id for check in suite.checks] for suite in SUITES}
    assert ids == {
        "journal": [
            "a1-append-atomicity",
            "a2-total-order",
            "a3-read-your-writes",
            "a4-opaque-payload",
            "a5-monotonic-seq",
            "a5-stale-tail-race",
            "a5-stale-replayer-fencing",
            "meta-separation",
            "golden-fold-state",
            "decide-once-oracle",
            "abandon-derived-skip",
        ],
        "leasable": [
            "lease-exclusive-acquire",
            "fencing-stale-epoch",
            "fencing-epoch-tombstone",
            "lease-release-fences",
            "lease-ttl-and-renew-cadence",
        ],
        "fenced-writes": [
            "fenced-marker-declared",
            "fenced-meta-stale-rejected",
            "fenced-delete-stale-rejected",
            "fenced-tombstone-zombie-rejected",
            "fenced-run-match",
            "fenced-unleased-passthrough",
        ],
        "fenced-transcripts": [
            "fenced-transcripts-marker-declared",
            "fenced-transcripts-stale-put-rejected",
            "fenced-transcripts-stale-delete-rejected",
            "fenced-transcripts-run-match",
            "fenced-transcripts-unleased-passthrough",
            "fenced-transcripts-batch-stale-refused",
            "fenced-transcripts-batch-arguments",
        ],
    }


def test_expiry_check_is_omitted_without_a_pairing() -> None:
    """With neither ``expiry`` nor ``ttl_ms`` the wall-clock check is left out."""
    suite = leasable_store_conformance(lambda: memory(600_000))
    assert "lease-ttl-and-renew-cadence" not in [check.id for check in suite.checks]


def test_legacy_ttl_pairs_the_expiry_check_with_mk() -> None:
    """A bare ``ttl_ms`` adds the expiry check over ``mk`` itself."""
    suite = leasable_store_conformance(lambda: memory(600), ttl_ms=600)
    suite.check("lease-ttl-and-renew-cadence").run()
