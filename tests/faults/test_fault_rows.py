"""`rulvar check` rows say what the injected faults did (issue 20, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_cli.check import _explain, _result_row
from rulvar_conformance.harness.certify import CheckResult

PASSED = CheckResult(
    suite="power-loss",
    check_id="power-loss-file",
    status="passed",
    duration_ms=1.0,
    error=None,
    note="3 power cuts under the file store: 9 acknowledged appends",
)


@pytest.mark.clause("W5")
def test_a_passing_row_shows_and_carries_what_the_faults_did() -> None:
    assert _explain(PASSED) == [f"        did: {PASSED.note}"]
    assert _result_row(PASSED)["note"] == PASSED.note


@pytest.mark.clause("E1")
def test_rulvar_check_json_reports_the_disk_faults_of_the_file_store(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "check",
            f"file://{tmp_path}",
            "--suite",
            "disk-faults",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["check"]: row for row in json.loads(done.stdout)["results"]}
    assert rows["disk-faults-file"]["status"] == "passed"
    assert "6 disk faults injected" in rows["disk-faults-file"]["note"]
    assert rows["disk-faults-sqlite"]["status"] == "not-run"
    assert not any(row["suite"].endswith("(async)") for row in rows.values())
