"""The pytest plugin runs the two-handle and race checks on a conftest's locations.

A ``rulvar_store_locations`` fixture (fresh SQLite files, opened as often as a
check needs) gets the checks run, and passing; a plain ``rulvar_store_factory``
cannot open a location twice, so the same checks are reported as skipped "not
run", with the reason. Each test runs a real pytest in a scratch project, as a
store author would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

LOCATIONS_CONFTEST = textwrap.dedent(
    """
    import itertools

    import pytest
    from rulvar_store import OpenedStore, StoreLocation
    from rulvar_store_sqlite import SqliteStore

    @pytest.fixture(scope="session")
    def rulvar_store_locations(tmp_path_factory):
        directory = tmp_path_factory.mktemp("stores")
        numbers = itertools.count()

        def fresh():
            path = str(directory / f"store-{next(numbers)}.db")

            def opener(ttl_ms, now, fail_fast):
                store = SqliteStore(
                    path,
                    ttl_ms=ttl_ms or 60_000,
                    now=now,
                    busy_timeout_ms=100 if fail_fast else 5_000,
                )
                return OpenedStore(store, store.transcripts(), (store.close,))

            return StoreLocation(name=path, opener=opener, contention=True)

        return fresh
    """
)

FACTORY_CONFTEST = textwrap.dedent(
    """
    import pytest
    from rulvar_store import MemoryStore, OpenedStore

    @pytest.fixture(scope="session")
    def rulvar_store_factory():
        def fresh(ttl_ms):
            store = MemoryStore(ttl_ms=ttl_ms or 60_000)
            return OpenedStore(store, store.transcripts(), (store.close,))
        return fresh
    """
)

SELECTION = (
    "--rulvar-suite", "two-handles", "--rulvar-suite", "forced-races",
    "--rulvar-suite", "typed-errors",
    "-k", "x1-superseded or x3-window-append or contention-is-store-busy",
)  # fmt: skip


def run_pytest(project: Path, conftest: str) -> subprocess.CompletedProcess[str]:
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "conftest.py").write_text(conftest, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rulvar-certify",
         "-v", "-rs", *SELECTION],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.clause("C2")
def test_conftest_locations_run_the_two_handle_and_race_checks(tmp_path: Path) -> None:
    """With a location factory the checks run (not skipped) and pass."""
    done = run_pytest(tmp_path, LOCATIONS_CONFTEST)
    assert done.returncode == 0, done.stdout + done.stderr
    for item in (
        "test_two_handles[x1-superseded-terminal-meta] PASSED",
        "test_forced_races[x3-window-append] PASSED",
        "test_typed_errors[contention-is-store-busy] PASSED",
    ):
        assert f"rulvar-conformance::{item}" in done.stdout
    assert "3 passed" in done.stdout
    assert "skipped" not in done.stdout


@pytest.mark.clause("C2")
def test_plain_factory_reports_the_same_checks_as_not_run(tmp_path: Path) -> None:
    """A one-shot factory cannot open a second handle: each check is skipped, with why."""
    done = run_pytest(tmp_path, FACTORY_CONFTEST)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 skipped" in done.stdout
    assert "passed" not in done.stdout
    assert "not run: needs a second handle on the same location" in done.stdout
