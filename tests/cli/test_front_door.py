"""User mistakes at the command line: exit 2, one line naming the problem, no traceback.

``rulvar check`` validates a URL exactly as ``open_store`` would before running any
check, and creates nothing while doing so. Exit codes are in every ``--help``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rulvar_store import ConfigError, open_store
from rulvar_store.backend import (
    Backend,
    hookimpl,
    make_plugin_manager,
    parse_store_url,
    resolve_backend,
)

EXIT_USAGE = 2


def _rulvar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _refused_in_one_line(
    result: subprocess.CompletedProcess[str], *needles: str
) -> None:
    assert result.returncode == EXIT_USAGE, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "PASS" not in result.stdout  # no check ran


def test_sqlite_path_in_a_missing_folder_is_refused_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing" / "deeper"
    result = _rulvar("check", f"sqlite:///{missing / 'runs.db'}")
    _refused_in_one_line(result, str(missing))
    assert list(tmp_path.iterdir()) == []


def test_sqlite_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    _refused_in_one_line(_rulvar("check", f"sqlite:///{tmp_path}"), str(tmp_path))


def test_sqlite_path_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    _refused_in_one_line(_rulvar("check", f"sqlite:///{text}"), str(text))
    assert text.read_text() == "not a database\n"


def test_sqlite_path_where_nothing_can_be_created_is_refused() -> None:
    _refused_in_one_line(_rulvar("check", "sqlite:////proc/rulvar-x.db"), "/proc")


@pytest.mark.parametrize(
    ("query", "needle"),
    [("synchronous=OFF", "synchronous"), ("busy_timeout_ms=-1", "busy_timeout_ms")],
)
def test_a_bad_sqlite_option_is_one_configuration_error(
    tmp_path: Path, query: str, needle: str
) -> None:
    """Not one failed check per check: one line before any check runs."""
    result = _rulvar("check", f"sqlite:///{tmp_path / 'runs.db'}?{query}")
    _refused_in_one_line(result, needle)
    assert list(tmp_path.iterdir()) == []


def test_open_store_names_the_path_it_cannot_open(tmp_path: Path) -> None:
    """The library call fails the same way, naming the folder."""
    with pytest.raises(ConfigError, match=str(tmp_path / "missing")):
        open_store(f"sqlite:///{tmp_path / 'missing' / 'runs.db'}")


def test_file_url_where_nothing_can_be_created_is_refused() -> None:
    _refused_in_one_line(_rulvar("check", "file:///proc/rulvar-x"), "/proc")


def test_file_url_naming_a_file_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("x")
    _refused_in_one_line(_rulvar("check", plain.as_uri()), str(plain))
    with pytest.raises(ConfigError):
        open_store(plain.as_uri())


@pytest.mark.parametrize(
    ("port", "needle"), [("abc", "integer"), ("99999", "out of range")]
)
def test_postgres_url_with_a_bad_port_is_one_line(port: str, needle: str) -> None:
    """Raised inside URL parsing, it must neither trace back nor leak the password."""
    result = _rulvar("check", f"postgresql://app:s3cret@127.0.0.1:{port}/db")
    _refused_in_one_line(result, needle)
    assert "s3cret" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        ((), "Exit status: 0 success; 1 a check failed or something remains"),
        (("stores",), "Exit status: 0 listed; 2 a usage"),
        (("check",), "Exit status: 0 every check that ran passed; 1 a check failed"),
    ],
)
def test_every_help_documents_the_exit_codes(
    command: tuple[str, ...], codes: str
) -> None:
    """Each command states its own codes (``stores`` checks nothing, so no 1)."""
    result = _rulvar(*command, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert codes in text
    assert "2 a usage or configuration mistake" in text


def test_stores_table_columns_line_up() -> None:
    """Every row starts its capabilities and distribution where the header does."""
    lines = _rulvar("stores").stdout.splitlines()
    header = lines[0]
    columns = [header.index("CAPABILITIES"), header.index("DISTRIBUTION")]
    for line in lines[1:]:
        for column in columns:
            assert line[column - 1] == " ", line
            assert line[column] != " ", line


def test_a_backend_missing_two_modules_says_they_are_not_installed() -> None:
    """Plural agreement in the message that tells a user what to install."""

    class Plugin:
        @hookimpl
        def rulvar_store_backends(self) -> list[Backend]:
            return [
                Backend(
                    name="twin",
                    schemes=("twin",),
                    open=lambda url: SimpleNamespace(),  # type: ignore[arg-type,return-value]  # never opened
                    requires=("rulvar_no_such_mod_a", "rulvar_no_such_mod_b"),
                    extra="twin",
                )
            ]

    manager = make_plugin_manager(load_entry_points=False)
    manager.register(Plugin())
    with pytest.raises(ConfigError) as caught:
        resolve_backend(parse_store_url("twin://x"), manager)
    assert "needs rulvar_no_such_mod_a and rulvar_no_such_mod_b, which are not" in str(
        caught.value
    )
