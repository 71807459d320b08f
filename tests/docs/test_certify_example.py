"""The certification guide's location factory, as a conftest, certifies green.

Issue 38, item 1: the guide says to return its ``fresh_location`` factory from a
``rulvar_store_locations`` fixture and run ``pytest --rulvar-certify``. Its
opener turned ``ttl_ms=0`` into the default (``ttl_ms or 60_000``), so D9's
``args-ttl`` check failed for a reader doing exactly that. The block is taken
from the page as printed; the run is a real pytest in a scratch project.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._pages import ROOT, blocks

PAGE = ROOT / "docs" / "guides" / "certify-your-store.md"
FIXTURE = """

import pytest


@pytest.fixture
def rulvar_store_locations():
    return fresh_location
"""


@pytest.mark.clause("D9")
def test_the_guide_factory_passes_the_argument_rules_under_pytest(
    tmp_path: Path,
) -> None:
    """D9 and the other argument rules pass on the guide's SQLite factory."""
    (factory,) = [
        b.code for b in blocks("python", PAGE) if "def fresh_location" in b.code
    ]
    conftest = factory.split('if __name__ == "__main__":', 1)[0] + FIXTURE
    (tmp_path / "conftest.py").write_text(conftest, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "--rulvar-certify", "-k", "test_argument_rules"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
    assert "failed" not in done.stdout.splitlines()[-1]
