"""The conformance kit's suites pass against SqliteStore (CONTRACT 8.1 C2, F5, X5).

In-memory stores per check (C1), as the contract's wiring example; the journal and
fenced suites run once more over fresh FILES, where the WAL, the busy handler and
the on-disk format are in play.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_conformance import (
    ExpiryPairing,
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
    fenced_writes_conformance,
    journal_store_conformance,
    leasable_store_conformance,
    pytest_params,
)
from rulvar_conformance.harness.kit import ConformanceCheck
from rulvar_store_sqlite import SqliteStore


def mem(ttl_ms: int = 60_000) -> SqliteStore:
    return SqliteStore(":memory:", ttl_ms=ttl_ms)


def mem_pair() -> FencedTranscriptsFixture:
    store = mem()
    return FencedTranscriptsFixture(journal=store, transcripts=store.transcripts())


class _Files:
    """Fresh database files in a per-module scratch directory (set by a fixture)."""

    directory: Path | None = None
    numbers = itertools.count()

    @classmethod
    def store(cls) -> SqliteStore:
        assert cls.directory is not None, "the scratch fixture did not run"
        return SqliteStore(str(cls.directory / f"conf-{next(cls.numbers)}.db"))

    @classmethod
    def pair(cls) -> FencedTranscriptsFixture:
        store = cls.store()
        return FencedTranscriptsFixture(journal=store, transcripts=store.transcripts())


@pytest.fixture(autouse=True, scope="module")
def _scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    _Files.directory = tmp_path_factory.mktemp("conformance")
    yield
    _Files.directory = None


MEMORY_SUITES = [
    journal_store_conformance(mem),
    leasable_store_conformance(
        lambda: mem(600_000), expiry=ExpiryPairing(600, lambda: mem(600))
    ),
    fenced_writes_conformance(mem),
    fenced_transcripts_conformance(mem_pair),
]
FILE_SUITES = [
    journal_store_conformance(_Files.store),
    fenced_writes_conformance(_Files.store),
    fenced_transcripts_conformance(_Files.pair),
]


@pytest.mark.parametrize(
    "check", [p for suite in MEMORY_SUITES for p in pytest_params(suite)]
)
def test_memory_store_passes_conformance_check(check: ConformanceCheck) -> None:
    """Every kit check passes on a fresh ':memory:' SqliteStore per check."""
    check.run()


@pytest.mark.parametrize(
    "check", [p for suite in FILE_SUITES for p in pytest_params(suite)]
)
def test_file_store_passes_conformance_check(check: ConformanceCheck) -> None:
    """The journal and fenced checks pass on a fresh database file per check."""
    check.run()
