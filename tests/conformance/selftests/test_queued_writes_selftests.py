"""C4 self-tests of the queued-writes suite (Q19): each seeded queueing defect is caught.

Every broken store is the real SqliteStore with one piece of its queued puts
wrong (``_broken_queued``); the honest SQLite and PostgreSQL stores pass the
whole suite over the same kind of locations. The suite's asyncio twin runs over
the asyncio stores' own queues: two defects patched into PostgreSQL's and three
into SQLite's are caught there too, SQLite's also with the door's hand-over
slowed, under which a put queued at the wrong moment joins a batch at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest

from rulvar_conformance import Certification, certification_suites
from rulvar_conformance.harness.async_certify import async_suites
from rulvar_conformance.harness.certification import by_url
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_store.backend import parse_store_url, resolve_backend
from rulvar_store_postgres import _async_store
from rulvar_store_postgres._async_store import AsyncPostgresFencedTranscriptStore
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._async_store import AsyncSqliteTranscriptStore
from rulvar_store_sqlite._group_commit import GroupCommitter
from tests.conformance.selftests import _broken_queued as broken
from tests.conformance.selftests._broken_postgres import postgres_url
from tests.conformance.selftests._broken_sqlite import sqlite_locations
from tests.conformance.selftests._support import FULL, failure_of

# Long beside the loop's hop back to a woken caller (well under a millisecond).
SLOW_HAND_OVER_S: Final = 0.05

SELF_TESTED: frozenset[str] = frozenset(
    {
        "queued-rides-next-put",
        "queued-keeps-order",
        "queued-flush-lands-now",
        "queued-awaited-is-landed",
        "queued-superseded-refused",
    }
)

CASES: Final = [
    ("queued-rides-next-put", broken.QueueKeptApart, "did not carry it"),
    ("queued-rides-next-put", broken.CommitsAtOnce, "must wait for the next write"),
    ("queued-keeps-order", broken.ArrivalFirst, "landed after the later put"),
    ("queued-flush-lands-now", broken.FlushIgnored, "would miss it"),
    ("queued-awaited-is-landed", broken.AckedEarly, "acknowledged before it landed"),
    ("queued-superseded-refused", broken.UnfencedQueue, "not LeaseHeldError"),
]


def test_cases_cover_self_tested() -> None:
    """SELF_TESTED (a literal, for the meta-test) names exactly the checks CASES runs."""
    assert {check for check, _, _ in CASES} == SELF_TESTED


@pytest.mark.clause("C4")
@pytest.mark.clause("Q19")
@pytest.mark.parametrize(
    ("check_id", "store", "expected"),
    CASES,
    ids=[f"{check}-{store.__name__}" for check, store, _ in CASES],
)
def test_a_queueing_defect_fails_its_check(
    tmp_path: Path, check_id: str, store: type[SqliteStore], expected: str
) -> None:
    """Q19: the seeded defect is caught by the check written for it."""
    detail = failure_of(sqlite_locations(store, tmp_path), "queued-writes", check_id)
    assert expected in detail, detail


@pytest.mark.clause("C4")
def test_the_honest_sqlite_store_passes_the_queued_writes_suite(tmp_path: Path) -> None:
    """No false positive: the real SqliteStore passes every check."""
    (suite,) = certification_suites(
        Certification(sqlite_locations(SqliteStore, tmp_path), FULL), ["queued-writes"]
    )
    suite.run()


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_the_honest_postgres_store_passes_the_queued_writes_suite() -> None:
    """No false positive: PostgresStore's queued puts ride the next put of their lease."""
    parsed = parse_store_url(postgres_url())
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        (suite,) = certification_suites(
            Certification(locations, FULL), ["queued-writes"]
        )
        suite.run()


@contextmanager
def _async_queued_suite(url: str) -> Iterator[Any]:
    """The asyncio twin of the suite, over the backend's own locations, as `rulvar check URL`."""
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        # By URL, as `rulvar check URL` does: the native asyncio store opens.
        suite = async_suites(by_url(locations, parsed, backend), ["queued-writes"])[0]
        assert suite.name == "queued-writes (async)"
        yield suite


def _async_failure(url: str, check_id: str) -> str:
    """Run ``check_id`` of the asyncio twin at ``url``; it must fail."""
    with _async_queued_suite(url) as suite:
        try:
            suite.check(check_id).run()
        except ConformanceFailure as failure:
            return failure.detail
    raise AssertionError(f"{check_id} passed against the broken asyncio store")


# (check, the patched-in defect: its owner, attribute and stand-in, the failure's words)
ASYNC_CASES: Final = [
    (
        "queued-rides-next-put",
        (AsyncPostgresFencedTranscriptStore, "put", broken.async_put_leaving_the_queue),
        "did not carry it",
    ),
    (
        "queued-keeps-order",
        (_async_store, "last_writes", broken.first_write_stays),
        "landed after the later put",
    ),
]


@pytest.mark.postgres
@pytest.mark.clause("C4")
@pytest.mark.clause("Q19")
@pytest.mark.parametrize(
    ("check_id", "defect", "expected"),
    ASYNC_CASES,
    ids=[f"{check}-{defect[2].__name__}" for check, defect, _ in ASYNC_CASES],
)
def test_an_async_queueing_defect_fails_its_check(
    monkeypatch: pytest.MonkeyPatch,
    check_id: str,
    defect: tuple[object, str, object],
    expected: str,
) -> None:
    """Q19 on the asyncio path: a defect of the asyncio PostgreSQL queue is caught."""
    monkeypatch.setattr(*defect)
    detail = _async_failure(postgres_url(), check_id)
    assert expected in detail, detail


# (check, the asyncio SQLite blob store's method and its stand-in, the failure's words)
ASYNC_SQLITE_CASES: Final = [
    (
        "queued-rides-next-put",
        ("queue_put", broken.async_sqlite_queue_apart),
        "did not carry it",
    ),
    (
        "queued-awaited-is-landed",
        ("await_put", broken.async_sqlite_acked_early),
        "acknowledged before it landed",
    ),
    (
        "queued-flush-lands-now",
        ("flush_queued", broken.async_sqlite_flush_ignored),
        "would miss it",
    ),
]


def _slow_hand_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """The door's worker descheduled between waking a batch's callers and handing over.

    A loaded machine does this now and then: the caller of the batch before a
    check's queued put (its acquire) runs on while the door still counts a
    batch as led, and a put queued then joins the next batch at once instead
    of lingering. Each check must still see a lingering put (the suite's
    docstring); once, under a loaded run, a check whose put joined such a batch
    passed a store whose ``flush_queued`` did nothing.
    """
    hand_over = GroupCommitter._hand_over

    def slowly(self: GroupCommitter, batch: Any, own: Any) -> None:
        time.sleep(SLOW_HAND_OVER_S)
        hand_over(self, batch, own)

    monkeypatch.setattr(GroupCommitter, "_hand_over", slowly)


@pytest.fixture(params=["prompt", "slow-hand-over"])
def hand_over(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The door's hand-over as it comes, then slowed (``_slow_hand_over``)."""
    if request.param == "slow-hand-over":
        _slow_hand_over(monkeypatch)


@pytest.mark.clause("C4")
@pytest.mark.clause("Q19")
@pytest.mark.usefixtures("hand_over")
@pytest.mark.parametrize(
    ("check_id", "defect", "expected"),
    ASYNC_SQLITE_CASES,
    ids=[f"{check}-{defect[1].__name__}" for check, defect, _ in ASYNC_SQLITE_CASES],
)
def test_an_async_sqlite_queueing_defect_fails_its_check(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    check_id: str,
    defect: tuple[str, object],
    expected: str,
) -> None:
    """Q19 on the asyncio SQLite path: a defect of its queue is caught."""
    monkeypatch.setattr(AsyncSqliteTranscriptStore, *defect)
    detail = _async_failure(f"sqlite:///{tmp_path / 'queued.db'}", check_id)
    assert expected in detail, detail


@pytest.mark.clause("C4")
@pytest.mark.usefixtures("hand_over")
def test_the_honest_async_sqlite_store_passes_the_queued_writes_suite(
    tmp_path: Path,
) -> None:
    """No false positive: the asyncio SQLite store's own queue passes every check."""
    with _async_queued_suite(f"sqlite:///{tmp_path / 'queued.db'}") as suite:
        suite.run()


async def _flush_ignored_slowly(self: AsyncSqliteTranscriptStore) -> None:
    """``flush_queued`` doing nothing, slowly: the door's hand-over ends meanwhile."""
    await asyncio.sleep(2 * SLOW_HAND_OVER_S)


@pytest.mark.clause("C4")
@pytest.mark.clause("Q19")
def test_a_put_queued_during_a_hand_over_does_not_hide_an_ignored_flush(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Q19: the flaky miss, made certain, is caught.

    Queued while the door still hands over the acquire's batch, a put joins
    the next batch, which lands it while the do-nothing flush sleeps: a check
    that queued then would read the put and pass the broken store.
    """
    _slow_hand_over(monkeypatch)
    monkeypatch.setattr(
        AsyncSqliteTranscriptStore, "flush_queued", _flush_ignored_slowly
    )
    detail = _async_failure(
        f"sqlite:///{tmp_path / 'queued.db'}", "queued-flush-lands-now"
    )
    assert "would miss it" in detail, detail
