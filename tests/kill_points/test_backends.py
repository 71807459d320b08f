"""The ten scenarios and the store-level table against SQLite, PostgreSQL and files.

Each check of the kill-point suite is one test. Every row a backend's write
path has a failpoint for must pass; the rows it has no failpoint for must be
reported NOT RUN (never passed); the memory store, which no child process can
open, reports every row not run.
"""

from __future__ import annotations

from typing import Final

import pytest
from _pytest.mark.structures import ParameterSet

from rulvar_conformance import Certification, CheckNotRun, ConformanceSuite
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_conformance.kill_points.store_ops import STORE_CASES
from rulvar_store.backend import StoreLocation

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


@pytest.mark.parametrize(("check_id", "runs"), _params("file"))
def test_file_store(check_id: str, runs: bool, file_suite: ConformanceSuite) -> None:
    """File store: old state, new state or a repaired torn line, never a mix."""
    _run(file_suite, check_id, runs)


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
