"""The `rulvar` command: listings, certification, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rulvar_conformance.harness.certify import suite_specs
from rulvar_store import list_backends


def _rulvar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_stores_json_lists_the_builtin_backends() -> None:
    result = _rulvar("stores", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["backends"]}
    assert {"memory", "file"} <= set(rows)
    assert rows["memory"]["capabilities"] == [
        "fenced_transcripts",
        "fenced_writes",
        "leases",
        "meta_lookup",
    ]
    assert rows["file"]["capabilities"] == ["meta_lookup", "single_writer_files"]


def test_stores_table_names_schemes_and_distribution() -> None:
    result = _rulvar("stores")
    assert result.returncode == 0
    assert "memory://" in result.stdout
    assert "rulvar-stores" in result.stdout


def test_check_memory_passes_every_check() -> None:
    result = _rulvar("check", "memory://", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["failed"] == 0
    suites = {row["suite"] for row in report["results"]}
    # Every default suite the backend's capabilities call for (file-machinery
    # needs single_writer_files, which only file:// declares).
    memory = next(b.backend for b in list_backends() if b.backend.name == "memory")
    assert suites == {
        spec.name
        for spec in suite_specs()
        if spec.default and spec.capability in (None, *memory.capabilities)
    }
    # memory:// offers no fail-fast handles and calls no failpoints: those checks
    # are reported as not run, each with its reason, never as passed.
    assert all(
        row["passed"] or (row["status"] == "not-run" and row["reason"])
        for row in report["results"]
    )


def test_check_table_ends_with_the_counts() -> None:
    result = _rulvar("check", "memory://")
    assert result.returncode == 0
    assert (
        result.stdout.rstrip()
        .splitlines()[-1]
        .startswith(f"{result.stdout.count('PASS')} passed, 0 failed")
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("check", "nope://x"), "no store backend for scheme 'nope'"),
        (("check", "not a url"), "malformed store URL"),
        (("check", "memory://?bogus=1"), "memory:// takes only ttl_ms"),
    ],
)
def test_user_mistakes_exit_2_with_one_line_and_no_traceback(
    args: tuple[str, ...], message: str
) -> None:
    result = _rulvar(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_command_is_a_usage_error() -> None:
    result = _rulvar("frobnicate")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_credentials_never_reach_the_output() -> None:
    result = _rulvar("check", "nope://alice:hunter2@db/x")
    assert "hunter2" not in result.stdout + result.stderr


def test_check_of_an_unreachable_server_is_one_typed_line() -> None:
    """Certification connects once up front instead of failing every check."""
    result = _rulvar(
        "check", "postgresql://alice:hunter2@127.0.0.1:9/test?connect_timeout_s=2"
    )
    assert result.returncode == 2
    assert "store_unavailable" in result.stderr
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert "FAIL" not in result.stdout
