"""``rulvar check`` on a store that hangs: failing rows within the deadline, never a frozen terminal.

The backend behind the URL is ``NeverHandsOn`` (the real SQLite store with a
group commit whose first leader never hands leadership on), put in front of the
command by replacing its backend lookup in a child interpreter (the command
leaves with ``os._exit`` when checks left stuck threads, so it cannot run inside
pytest's process). With ``--check-timeout 1`` the new X8/X9 suites (whose child
process and held threads hang too) fail row by row as "did not finish in 1 s",
and the command ends with the failing exit code instead of waiting for the
stuck threads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
EXIT_FAILED: Final = 1

_RUNNER: Final = """
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import rulvar_cli.check as check_module
from rulvar_cli import cli
from rulvar_store.backend import Backend
from tests.conformance.selftests._broken_sqlite import NeverHandsOn, sqlite_locations


@contextmanager
def certify(url):
    yield sqlite_locations(NeverHandsOn, Path(sys.argv[2]))


backend = Backend(
    name="never-hands-on",
    schemes=("hang",),
    open=lambda url: None,
    capabilities=frozenset({"leases", "meta_lookup", "fenced_writes"}),
    certify=certify,
)
check_module.resolve_backend = lambda parsed: backend
cli(sys.argv[3:])
"""


@pytest.mark.clause("C4")
def test_rulvar_check_on_a_hanging_group_commit_prints_failing_rows(
    tmp_path: Path,
) -> None:
    """Each hanging check is a FAIL row within the deadline; the command ends."""
    suites = ["--suite", "next-op-sees", "--suite", "durability"]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUNNER,
            str(ROOT),
            str(tmp_path),
            "check",
            "hang://x",
            *suites,
            "--check-timeout",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = result.stdout
    assert result.returncode == EXIT_FAILED, output + result.stderr
    rows = [line for line in output.splitlines() if line.startswith("  FAIL")]
    assert len(rows) >= 4, output  # three X9 checks and the SIGKILL check
    assert output.count("did not finish in 1 s") >= 4, output
    assert "exiting without waiting for them" in result.stderr


@pytest.mark.clause("K10")
def test_rulvar_check_suite_all_on_a_hanging_group_commit_ends_within_its_run_limit(
    tmp_path: Path,
) -> None:
    """K10: `--suite all` over a store that never hands on ends by --run-timeout.

    At a 5 s deadline each, ~400 hanging checks would take over half an hour:
    the run's own limit and the shorter deadline after the first hang end the
    command in about the run limit plus one check's deadline, every check a row.
    """
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUNNER,
            str(ROOT),
            str(tmp_path),
            "check",
            "hang://x",
            "--suite",
            "all",
            "--check-timeout",
            "5",
            "--run-timeout",
            "12",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout
    assert result.returncode == EXIT_FAILED, output + result.stderr
    assert "not started: the run's limit of 12 s was spent" in output, output
    assert "did not finish in 5 s" in output, output
    summary = output.strip().splitlines()[-1]
    assert " failed, " in summary, summary
