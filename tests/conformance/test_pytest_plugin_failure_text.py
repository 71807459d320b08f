"""A failing kit item under pytest says its failure once, without exception chains.

Issue 38, item 1: a conftest whose opener turns ``ttl_ms=0`` into a default
(``ttl_ms or 60_000``) fails ``args-ttl``, rightly; the report printed the
observation three times, with "The above exception was the direct cause" and
"During handling of the above exception" between the copies. A real pytest runs
in a scratch project, as a store author's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ZERO_BECOMES_DEFAULT = textwrap.dedent(
    """
    import itertools

    import pytest
    from rulvar_store import OpenedStore
    from rulvar_store.backend import StoreLocation
    from rulvar_store_sqlite import SqliteStore

    @pytest.fixture(scope="session")
    def rulvar_store_locations(tmp_path_factory):
        directory = tmp_path_factory.mktemp("stores")
        numbers = itertools.count()

        def fresh():
            path = str(directory / f"store-{next(numbers)}.db")

            def opener(ttl_ms, now, fail_fast):
                store = SqliteStore(path, ttl_ms=ttl_ms or 60_000, now=now)
                return OpenedStore(store, store.transcripts(), (store.close,))

            return StoreLocation(name=path, opener=opener)

        return fresh
    """
)


@pytest.mark.clause("D9")
def test_a_d9_failure_prints_its_observation_once(tmp_path: Path) -> None:
    """D9 (ttl 0 must be a ConfigError): the failing item's text appears once."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(ZERO_BECOMES_DEFAULT, encoding="utf-8")
    # Without CI: there pytest's own short summary repeats a failure's whole text
    # (it is not cut to the terminal's width); that line is pytest's, not the kit's.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--rulvar-certify", "-k", "args-ttl"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert output.count("ttl_ms=zero (0): observed it opened") == 1, output
    assert "D9: ttl_ms is an int" in output
    assert "direct cause" not in output
    assert "During handling" not in output
