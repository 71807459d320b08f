"""What a new user saw the CLI print around its one-line errors (issue 38, item 2).

Each test runs the real ``rulvar`` in a child process with its output piped, as a
script or a CI log has it, and fails on the noise the issue names: psycopg.pool's
own error lines before the command's, a table header on stdout before a missing
schema's exit 2, ``certifying ...`` before a usage error, a ``running ...`` line
per check on stderr, and the internal ``now`` option among SQLite's URL options.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests._postgres_gate import postgres_url


def _rulvar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _with_path(url: str, path: str, query: str = "") -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


@pytest.mark.postgres
def test_a_missing_database_is_one_line_without_pool_logs() -> None:
    url = _with_path(postgres_url(), f"/nodb_{uuid.uuid4().hex[:8]}")
    done = _rulvar("runs", "list", url)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("rulvar: config: "), done.stderr
    assert "psycopg.pool" not in done.stderr


@pytest.mark.postgres
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_missing_schema_prints_no_header_before_exit_2(as_json: bool) -> None:
    """The listing's first page is read before the header (or the JSON opening)."""
    url = postgres_url()
    schema = f"nosuch_{uuid.uuid4().hex[:8]}"
    separator = "&" if urlsplit(url).query else "?"
    done = _rulvar(
        "runs",
        "list",
        f"{url}{separator}schema={schema}",
        *(["--json"] if as_json else []),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "RUN" not in done.stdout
    if as_json:
        assert done.stdout.startswith('{"error"'), done.stdout  # one JSON document
    else:
        assert done.stdout == ""
    assert f"schema '{schema}' holds no rulvar store" in done.stderr


def test_an_unknown_suite_is_a_usage_error_before_any_certifying_line() -> None:
    done = _rulvar("check", "memory://", "--suite", "nosuch")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "certifying" not in done.stderr
    assert "no suite named nosuch" in done.stderr


def test_a_piped_check_writes_no_line_per_check_to_stderr() -> None:
    done = _rulvar("check", "memory://", "--suite", "journal", "--suite", "leasable")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("certifying memory:// (memory)\n")
    assert "passed, 0 failed" in done.stdout.splitlines()[-1]


def test_the_sqlite_option_list_leaves_out_the_internal_now(tmp_path: Path) -> None:
    done = _rulvar("runs", "list", f"sqlite:///{tmp_path}/runs.db?bogus=1")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    listed = line.split("takes only ", 1)[1].split(" (and now= as a keyword)")[0]
    assert listed.split(", ") == [
        "busy_timeout_ms", "group_commit", "private", "readonly", "synchronous", "ttl_ms",
    ]  # fmt: skip
    assert line.endswith("not bogus")
