"""Importing a store class without its extra names the extra (issue 38, item 4).

``open_store("sqlite:///...")`` without apsw already said which extra to add;
``from rulvar_store_sqlite import SqliteStore`` raised a bare
``ModuleNotFoundError: No module named 'apsw'``. Each case runs a fresh
interpreter in which the driver cannot be imported (``sys.modules[name] = None``
makes its import raise ``ModuleNotFoundError`` exactly as an absent one does);
``ci/smoke_installs.py`` checks the same in real venvs without the extras.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CASES = [
    ("apsw", "rulvar_store_sqlite", "SqliteStore", "sqlite"),
    ("apsw", "rulvar_store_sqlite", "AsyncSqliteStore", "sqlite"),
    ("psycopg", "rulvar_store_postgres", "PostgresStore", "postgres"),
    ("psycopg_pool", "rulvar_store_postgres", "AsyncPostgresStore", "postgres"),
    ("langgraph", "rulvar_langgraph", "RulvarSaver", "langgraph"),
    ("langchain_core", "rulvar_langgraph", "AsyncRulvarSaver", "langgraph"),
]


@pytest.mark.parametrize(("driver", "module", "name", "extra"), CASES)
def test_a_direct_import_without_the_driver_names_the_extra(
    driver: str, module: str, name: str, extra: str
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{driver!r}] = None  # as if the extra were not installed
        from rulvar_store import ConfigError, MissingExtraError
        try:
            from {module} import {name}
        except ModuleNotFoundError as exc:  # what `except ImportError` code expects
            assert isinstance(exc, MissingExtraError), repr(exc)
            assert isinstance(exc, ConfigError)
            assert "pip install 'rulvar-stores[{extra}]'" in str(exc), str(exc)
            assert exc.__cause__ is None and exc.__suppress_context__
            print(exc)
        else:
            raise SystemExit("imported without the driver")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{module}" in done.stdout


def test_open_store_without_the_driver_raises_the_same_class() -> None:
    script = textwrap.dedent(
        """
        import importlib.util, sys
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name == "apsw" else real(name, *a)
        from rulvar_store import MissingExtraError, open_store
        try:
            open_store("sqlite:///never.db")
        except MissingExtraError as exc:
            assert exc.name == "apsw" and "rulvar-stores[sqlite]" in str(exc), str(exc)
        else:
            raise SystemExit("opened without the driver")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
