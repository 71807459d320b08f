"""Where users get the kill points: the suite registry and ``rulvar check``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rulvar_cli import cli
from rulvar_conformance.harness.certify import Certification, certification_suites
from rulvar_store.backend import StoreLocation


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


@pytest.mark.clause("K8")
def test_kill_points_run_only_when_selected() -> None:
    """A plain certification keeps its suites; --suite kill-points and all add it."""
    certification = Certification(_never_opened, frozenset({"leases"}))
    default = [suite.name for suite in certification_suites(certification)]
    assert "kill-points" not in default
    chosen = certification_suites(certification, ["kill-points"])
    assert [suite.name for suite in chosen] == ["kill-points"]
    every = [suite.name for suite in certification_suites(certification, ["all"])]
    assert "kill-points" in every


@pytest.mark.clause("K8")
def test_rulvar_check_reports_every_memory_row_not_run() -> None:
    """memory:// cannot reach a child process: every row NOT RUN, none passed, exit 0."""
    result = CliRunner().invoke(
        cli, ["check", "memory://", "--suite", "kill-points", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # stderr names each check as it starts
    assert (payload["passed"], payload["failed"]) == (0, 0)
    assert payload["not_run"] == len(payload["results"]) > 10
    assert all("child process" in row["reason"] for row in payload["results"])
