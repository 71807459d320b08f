"""`rulvar check` output a store author can act on: clauses, their text, the detail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_cli.check import _explain, _result_row
from rulvar_conformance.clauses import CLAUSES
from rulvar_conformance.harness.certify import CheckResult

FAILED = CheckResult(
    suite="two-handles",
    check_id="x1-superseded-terminal-meta",
    status="failed",
    duration_ms=1.25,
    error="store-conformance x1-superseded-terminal-meta: the superseded put_meta: "
    "expected LeaseHeldError, observed it succeeded",
    title="a superseded segment's terminal put_meta is refused",
    clauses=("X1", "F6"),
)
NOT_RUN = CheckResult(
    suite="typed-errors",
    check_id="contention-is-store-busy",
    status="not-run",
    duration_ms=0.1,
    error="needs a fail-fast handle; location 'x' does not offer it",
    title="contention is StoreBusyError",
    clauses=("Q5",),
)


@pytest.mark.clause("C4")
def test_failing_row_names_each_clause_with_its_text_and_the_detail() -> None:
    """A failing row lists the check's title, every clause id and text, then the detail."""
    lines = _explain(FAILED)
    assert lines[0].strip() == FAILED.title
    assert lines[1].strip() == f"X1: {CLAUSES['X1']}"
    assert lines[2].strip() == f"F6: {CLAUSES['F6']}"
    assert lines[3].strip() == (
        "failed: the superseded put_meta: expected LeaseHeldError, observed it succeeded"
    )


@pytest.mark.clause("C4")
def test_json_row_carries_clause_texts_status_and_detail() -> None:
    """--json rows hold the same facts: clauses with texts, status, detail or reason."""
    row = _result_row(FAILED)
    assert row["status"] == "failed"
    assert row["clauses"] == [
        {"id": "X1", "text": CLAUSES["X1"]},
        {"id": "F6", "text": CLAUSES["F6"]},
    ]
    assert row["detail"].startswith("the superseded put_meta: expected LeaseHeldError")
    assert row["reason"] is None
    skipped = _result_row(NOT_RUN)
    assert skipped["status"] == "not-run"
    assert skipped["reason"] == NOT_RUN.error
    assert skipped["detail"] is None


def test_not_run_rows_show_their_reason_in_the_table() -> None:
    """memory:// cannot offer fail-fast handles: the row says so, and it is not a pass."""
    done = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "check", "memory://", "--suite",
         "typed-errors"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NOT RUN  typed-errors" in done.stdout
    assert "reason: needs a fail-fast handle that raises StoreBusyError" in done.stdout
    assert done.stdout.rstrip().endswith("0 passed, 0 failed, 1 not run across 1 suite")
    as_json = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "check", "memory://", "--suite",
         "typed-errors", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    (row,) = json.loads(as_json.stdout)["results"]
    assert row["status"] == "not-run"
    assert row["clauses"] == [{"id": "D16", "text": CLAUSES["D16"]}]
    assert "fail-fast handle" in row["reason"]


@pytest.mark.clause("C4")
def test_a_named_suite_the_store_does_not_promise_is_said_left_out(
    tmp_path: Path,
) -> None:
    """file:// has no leases: `--suite leasable` says why nothing ran, in both forms."""
    url = f"file://{tmp_path / 'runs'}"
    done = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "check", url, "--suite", "leasable",
         "--suite", "journal"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "left out: leasable checks the 'leases' capability, which file stores do "
        "not declare"
    ) in done.stdout
    assert "left out: journal" not in done.stdout  # it ran
    assert " failed, 0 not run across 1 suite" in done.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "check", url, "--suite", "leasable",
         "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    payload = json.loads(as_json.stdout)
    assert payload["left_out"] == [{"suite": "leasable", "capability": "leases"}]
    assert payload["results"] == []
