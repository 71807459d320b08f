"""The ten scenarios and the store-level table against SQLite, PostgreSQL and files.

SQLite and PostgreSQL run the table twice: with the child on the sync store and
with it writing through the asyncio API (``open_store_async`` behind the kit's
facade), so a death inside an awaited call is held to the same recovery.

Each check of the kill-point suite is one test. Every row a backend's write
path has a failpoint for must pass; the rows it has no failpoint for must be
reported NOT RUN (never passed); the memory store, which no child process can
open, reports every row not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
from _pytest.mark.structures import ParameterSet

from rulvar_conformance import Certification, CheckNotRun, ConformanceSuite
from rulvar_conformance.harness.async_certify import async_locations
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_conformance.kill_points.child import decode_opener, encode_opener
from rulvar_conformance.kill_points.store_ops import STORE_CASES
from rulvar_store.backend import StoreLocation, parse_store_url, resolve_backend
from rulvar_store_sqlite import AsyncSqliteStore

TRANSACTION: Final = (
    "after-begin",
    "after-fence-check",
    "before-commit",
    "after-commit",
)
FILE_POINTS: Final = {
    "append": ("mid-write", "after-write", "after-commit"),
    "put_meta": ("after-write", "after-fsync", "after-rename", "after-commit"),
    "delete": ("mid-write", "after-commit"),
    "blob_put": ("after-write", "after-fsync", "after-rename", "after-commit"),
    "blob_delete": ("after-commit",),
}


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


TEMPLATE: Final = kill_point_conformance(
    Certification(_never_opened, frozenset({"leases"}))
)


def _runs_on(backend: str, check_id: str) -> bool:
    if not check_id.startswith("kp-store-"):
        return backend != "file"  # the scenarios need leases
    case = next(case for case in STORE_CASES if case.id == check_id)
    if backend == "sqlite":
        return case.point in TRANSACTION
    if backend == "postgres":
        return case.point in (*TRANSACTION, "after-send")
    return case.point in FILE_POINTS.get(case.operation, ())


def _params(backend: str) -> list[ParameterSet]:
    params = []
    for check in TEMPLATE.checks:
        marks = [pytest.mark.clause(clause) for clause in check.clauses]
        params.append(
            pytest.param(
                check.id, _runs_on(backend, check.id), id=check.id, marks=marks
            )
        )
    return params


def _async_params(backend: str) -> list[ParameterSet]:
    """The scenarios and append's rows: the asyncio hop is the same for every operation.

    Every operation of a backend shares one transaction path and one hop to it,
    so append at each failpoint covers the hop; the full table through asyncio
    is ``rulvar check URL --suite kill-points --async`` (minutes, not for the suite).
    The referee's read of the lease row differs through the facade, though (the
    store's own peek, awaited on the facade's loop, for PostgreSQL): one row of
    each operation that leaves the dead child's lease live is kept too.
    """
    return [
        param
        for param in _params(backend)
        if not str(param.values[0]).startswith("kp-store-")
        or str(param.values[0]).startswith("kp-store-append-")
        or str(param.values[0]) in ASYNC_LEASE_ROWS
    ]


ASYNC_LEASE_ROWS: Final = frozenset(
    {
        "kp-store-delete-before-commit",
        "kp-store-acquire-after-commit",
        "kp-store-renew-after-commit",
        "kp-store-release-before-commit",
    }
)


def _run(suite: ConformanceSuite, check_id: str, runs: bool) -> None:
    check = suite.check(check_id)
    if runs:
        check.run()
        return
    with pytest.raises(CheckNotRun):
        check.run()


@pytest.mark.parametrize(("check_id", "runs"), _params("sqlite"))
def test_sqlite(check_id: str, runs: bool, sqlite_suite: ConformanceSuite) -> None:
    """SQLite: the scenarios and every transaction failpoint pass; others are not run."""
    _run(sqlite_suite, check_id, runs)


@pytest.mark.postgres
@pytest.mark.parametrize(("check_id", "runs"), _params("postgres"))
def test_postgres(check_id: str, runs: bool, postgres_suite: ConformanceSuite) -> None:
    """PostgreSQL: also the death with the COMMIT sent (after-send) is all or nothing."""
    _run(postgres_suite, check_id, runs)


@pytest.mark.clause("Y5")
@pytest.mark.parametrize(("check_id", "runs"), _async_params("sqlite"))
def test_sqlite_through_asyncio(
    check_id: str, runs: bool, sqlite_async_suite: ConformanceSuite
) -> None:
    """SQLite with the child's writes awaited on AsyncSqliteStore: the same recovery."""
    _run(sqlite_async_suite, check_id, runs)


@pytest.mark.postgres
@pytest.mark.clause("Y5")
@pytest.mark.parametrize(("check_id", "runs"), _async_params("postgres"))
def test_postgres_through_asyncio(
    check_id: str, runs: bool, postgres_async_suite: ConformanceSuite
) -> None:
    """PostgreSQL with the child's writes awaited on AsyncPostgresStore: the same recovery."""
    _run(postgres_async_suite, check_id, runs)


@pytest.mark.parametrize(("check_id", "runs"), _params("file"))
def test_file_store(check_id: str, runs: bool, file_suite: ConformanceSuite) -> None:
    """File store: old state, new state or a repaired torn line, never a mix."""
    _run(file_suite, check_id, runs)


@pytest.mark.clause("Y5")
def test_the_asyncio_children_open_the_native_async_stores(tmp_path: Path) -> None:
    """What a child of the asyncio table unpickles opens AsyncSqliteStore, not the sync one."""
    parsed = parse_store_url(f"sqlite:///{tmp_path / 'kp.db'}")
    certify = resolve_backend(parsed).certify
    assert certify is not None
    with certify(parsed) as fresh:
        location = async_locations(fresh)()
        try:
            opener = decode_opener(encode_opener(location.opener))
            with opener(None, None, False) as opened:
                facade = opened.journal
                assert isinstance(
                    getattr(facade, "async_store", None), AsyncSqliteStore
                )
                facade.append("r", {"seq": 1})
        finally:
            location.remove()


@pytest.mark.clause("K8")
def test_memory_store_reports_every_row_not_run(memory_suite: ConformanceSuite) -> None:
    """No child can open an in-process domain: every row is NOT RUN with that reason."""
    for check in memory_suite.checks:
        with pytest.raises(CheckNotRun, match="spawned child process"):
            check.run()


@pytest.mark.clause("K8")
def test_one_check_per_scenario_and_per_store_case() -> None:
    """kp-<scenario> for the ten scenarios, then kp-store-<op>-<point> per case."""
    ids = [check.id for check in TEMPLATE.checks]
    assert len(ids) == len(set(ids)) == 10 + len(STORE_CASES)
    assert all(i.startswith("kp-") for i in ids)
    assert [c.id for c in STORE_CASES] == ids[10:]


@pytest.mark.clause("K8")
def test_every_check_cites_clauses() -> None:
    """Each row names the clauses its failure breaks."""
    assert all(check.clauses for check in TEMPLATE.checks)
