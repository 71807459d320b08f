"""The kit's journal suite against JsonlFileStore, one fresh directory per store (C1)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_conformance import (
    Certification,
    ConformanceCheck,
    certification_suites,
    journal_store_conformance,
    probe_capabilities,
    pytest_params,
    run_suites,
    suite_specs,
)
from rulvar_store import JsonlFileStore
from rulvar_store.backend import parse_store_url, resolve_backend


class _FreshStores:
    """Hands the kit a store over a new directory under the current test's tmp dir."""

    def __init__(self) -> None:
        self.base: Path | None = None
        self._numbers = itertools.count()

    def __call__(self) -> JsonlFileStore:
        assert self.base is not None, "used outside a test"
        return JsonlFileStore(self.base / f"store-{next(self._numbers)}")


FRESH = _FreshStores()
SUITE = journal_store_conformance(FRESH)


@pytest.fixture(autouse=True)
def _fresh_base(tmp_path: Path) -> Iterator[None]:
    FRESH.base = tmp_path
    yield
    FRESH.base = None


@pytest.mark.parametrize("check", pytest_params(SUITE))
def test_jsonl_file_store_passes_the_journal_suite(check: ConformanceCheck) -> None:
    """Every JournalStore obligation holds for the JSONL file store."""
    check.run()


@pytest.mark.clause("X5")
def test_file_backend_certifies_with_exactly_its_declared_capabilities(
    tmp_path: Path,
) -> None:
    """`rulvar check file:///dir` finds meta lookup and its file machinery; all pass."""
    url = parse_store_url(f"file://{tmp_path / 'certify'}")
    backend = resolve_backend(url)
    assert backend.certify is not None
    with backend.certify(url) as locations:
        capabilities = probe_capabilities(locations)
        assert capabilities == backend.capabilities
        assert capabilities == {"meta_lookup", "single_writer_files"}
        results = run_suites(
            certification_suites(Certification(locations, capabilities))
        )
    assert [r.error for r in results if r.status == "failed"] == []
    # Only checks that do not apply are not run: T7 (a file journal has no twin),
    # the owner and ttl rules of a store without leases, and checks of promises
    # the file store does not make: a pool, prepared statements on a PostgreSQL
    # session, a held COMMIT (no before-commit failpoint), a durability
    # setting, a SQLite database file.
    assert [r.check_id for r in results if r.status == "not-run"] == [
        "pool-serves-waiting-callers",
        "pool-serves-waiting-coroutines",
        "store-reprepares-forgotten",
        "async-store-reprepares-forgotten",
        "data-transcripts-twin",
        "args-owners",
        "args-ttl",
        "load-since-in-flight-append",
        "durability-setting",
        "file-replaced-every-write",
    ]
    assert {r.suite for r in results} == {
        spec.name
        for spec in suite_specs()
        if spec.default and spec.capability in (None, "single_writer_files")
    }
    assert SUITE.name in {r.suite for r in results}
    # Certifying creates nothing of the user's: the missing directory stays missing
    # (the scratch space lived in its nearest existing parent and is gone).
    assert list(tmp_path.iterdir()) == []
