"""The kit certifies the asyncio path: every default suite and the cancellation suite."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rulvar_conformance import Certification, run_suites
from rulvar_conformance.harness.async_certify import async_suites
from rulvar_conformance.harness.certification import by_url
from rulvar_conformance.harness.certify import CheckResult
from rulvar_conformance.harness.site import FEATURE_REASONS
from rulvar_conformance.suites.cancellation import cancellation_conformance
from rulvar_store.backend import parse_store_url, resolve_backend
from rulvar_store_sqlite import SqliteStore
from tests._postgres_gate import postgres_url
from tests.conformance.selftests._broken_sqlite import sqlite_locations

T = TypeVar("T")

# Why a check may legitimately not run on the async path: a location ability the
# backend lacks, a store without failpoints, and the facade's lack of a
# ``transcripts()`` method (the twin comes from the opener, T7 is certified sync).
EXPLAINED = (
    *FEATURE_REASONS.values(),
    "transcripts() twin",
    "so no window can be forced open",  # memory calls no failpoints: threads race instead
    # Copies run on sync handles: the async facade offers the SPI, not the
    # copy abilities (moving suite, V3).
    "cannot write a moved-run tombstone (no fence_moved)",
    # Default suites since issue 40: a link to stall needs TCP, a failpoint to hold
    # an append at, one handle for several loops a store that declares it.
    "declares no TCP route",
    "never calls rulvar_store.backend.hit",
    "does not declare shares_across_loops",
    "reports no durability setting",
    # Queued puts (Q19): the asyncio PostgreSQL store offers them; memory's and
    # SQLite's asyncio blob stores do not.
    "offers no queued puts",
)


def _certify_async(url: str) -> list[CheckResult]:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        # As `rulvar check URL` does: the URL-options checks open URLs of their own.
        return run_suites(async_suites(by_url(locations, parsed, backend)))


def _assert_certified(
    results: list[CheckResult],
    *,
    cancellation_runs: bool,
    also_explained: tuple[str, ...] = (),
    races: bool = True,
) -> None:
    failed = [
        f"{r.suite} {r.check_id}: {r.error}" for r in results if r.status == "failed"
    ]
    assert failed == []
    unexplained = [
        f"{r.check_id}: {r.error}"
        for r in results
        if r.status == "not-run"
        and not any(why in (r.error or "") for why in (*EXPLAINED, *also_explained))
    ]
    assert unexplained == []
    cancellation = [r for r in results if r.suite.startswith("cancellation")]
    assert len(cancellation) == 8
    if cancellation_runs:
        assert all(r.status == "passed" for r in cancellation)
    if races:  # the race suites need leases
        suites = {r.suite for r in results}
        assert {"forced-races (async)", "thread-races (async)"} <= suites


@pytest.mark.clause("Y5")
@pytest.mark.clause("Y2")
@pytest.mark.clause("Y3")
def test_memory_passes_every_default_suite_and_cancellation_through_the_async_api() -> (
    None
):
    _assert_certified(_certify_async("memory://"), cancellation_runs=True)


@pytest.mark.clause("Y5")
@pytest.mark.clause("Y2")
@pytest.mark.clause("Y3")
def test_sqlite_passes_every_default_suite_and_cancellation_through_the_async_api(
    tmp_path: Path,
) -> None:
    results = _certify_async(f"sqlite:///{tmp_path / 'certify.db'}")
    _assert_certified(results, cancellation_runs=True)
    assert "shared-handle (async)" in {r.suite for r in results}


@pytest.mark.clause("Y5")
@pytest.mark.clause("Y2")
@pytest.mark.clause("Y3")
def test_postgres_passes_every_default_suite_and_cancellation_through_the_async_api() -> (
    None
):
    schema = f"rulvar_async_{secrets.token_hex(4)}"
    results = _certify_async(f"{postgres_url()}?schema={schema}")
    _assert_certified(results, cancellation_runs=True)


@pytest.mark.clause("Y5")
@pytest.mark.clause("Y2")
def test_file_passes_every_default_suite_and_its_cancellation_checks_through_the_async_api(
    tmp_path: Path,
) -> None:
    """A store without leases is opened without a ttl (file:// refuses the option)."""
    results = _certify_async(f"file://{tmp_path / 'store'}")
    _assert_certified(
        results,
        cancellation_runs=False,
        also_explained=("the store has no leases", "the store grants no leases"),
        races=False,
    )
    assert "file-machinery (async)" not in {r.suite for r in results}
    cancellation = {
        r.check_id: r.status for r in results if r.suite.startswith("cancellation")
    }
    leased = {"cancel-acquire", "cancel-renew", "cancel-release"}
    assert {check for check, status in cancellation.items() if status != "passed"} == (
        leased
    )


async def _resumes_at_once(future: asyncio.Future[T]) -> T:
    """A seeded defect: the caller is resumed by a cancel while its call still runs."""
    return await asyncio.shield(future)


@pytest.fixture
def splitting_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    # The seeded defect replaces the adapter's own wait; nothing public can reach it.
    monkeypatch.setattr(
        "rulvar_store._async_adapter.finish_uncancelled", _resumes_at_once
    )


@pytest.mark.clause("Y2")
def test_the_cancellation_suite_fails_an_adapter_that_resumes_a_cancelled_caller_early(
    tmp_path: Path, splitting_adapter: None
) -> None:
    """Negative control: a caller resumed while its write is still inside the store.

    SQLite has a native async store now, so the locations here open plain
    ``SqliteStore`` handles through a function: the kit adapts those with the
    generic adapter, the code this seeded defect breaks.
    """
    results = run_suites(
        [
            cancellation_conformance(
                Certification(
                    sqlite_locations(SqliteStore, tmp_path), frozenset({"leases"})
                )
            )
        ]
    )
    failed: list[Any] = [r for r in results if r.status == "failed"]
    assert failed, "the suite passed an adapter that splits cancelled calls"
    assert all("was still inside the store" in (r.error or "") for r in failed)


@pytest.mark.clause("Y5")
def test_a_selection_of_machine_suites_only_runs_nothing_on_the_async_path(
    tmp_path: Path,
) -> None:
    """``--suite power-loss`` certifies the files; no async suite, no cancellation."""
    parsed = parse_store_url(f"sqlite:///{tmp_path / 'machine.db'}")
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        certification = by_url(locations, parsed, backend)
        assert async_suites(certification, ["power-loss", "disk-faults"]) == []
        names = [suite.name for suite in async_suites(certification, ["journal"])]
    assert names == ["journal (async)", "cancellation (async)", "loop-health (async)"]
