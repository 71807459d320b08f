"""The plugin guide's example, pip-installed from a scratch distribution, certifies green.

The two blocks marked ``plugin example`` (the entry point and the module) are
written into a new distribution exactly as printed, installed into a private
directory, and ``rulvar check mystore://...`` runs every default suite on it in
a fresh process. Afterwards nothing of the certification is left: no database,
no ``-wal``/``-shm`` file, no scratch folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pip_target import install_into

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "backend-plugin.md"
MARKER = "<!-- plugin example"
BLOCK = re.compile(
    r"(?P<before>[^\n]*)\n```(?P<lang>toml|python)\n(?P<code>.*?)\n```", re.DOTALL
)


def _example_blocks() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    found = {
        match["lang"]: match["code"]
        for match in BLOCK.finditer(text)
        if match["before"].startswith(MARKER)
    }
    assert set(found) == {"toml", "python"}, (
        "the plugin guide lost a plugin-example block"
    )
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    blocks = _example_blocks()
    work = tmp_path_factory.mktemp("plugin-example")
    source = work / "src"
    (source / "my_package").mkdir(parents=True)
    (source / "my_package" / "__init__.py").write_text("", encoding="utf-8")
    (source / "my_package" / "rulvar_plugin.py").write_text(
        blocks["python"] + "\n", encoding="utf-8"
    )
    (source / "pyproject.toml").write_text(
        "[build-system]\n"
        'requires = ["setuptools>=77"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        'name = "my-package"\n'
        'version = "0.0.1"\n'
        'requires-python = ">=3.11"\n\n'
        + blocks["toml"]
        + "\n\n[tool.setuptools]\n"
        + 'packages = ["my_package"]\n',
        encoding="utf-8",
    )
    site = work / "site"
    install_into(source, site)
    scratch = work / "tmp"
    scratch.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return {**env, "PYTHONPATH": str(site), "TMPDIR": str(scratch)}


def test_the_guide_plugin_is_certified_and_leaves_nothing_behind(
    installed: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "runs.db"
    result = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "check", f"mystore://{target}", "--json"],
        env=installed,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["failed"] == 0
    not_run = {row["check"] for row in report["results"] if row["status"] == "not-run"}
    # Every ability is declared: only rows the store's write path has no
    # failpoint for, or asyncio-only rows, may be not run.
    ran = {row["suite"] for row in report["results"] if row["status"] == "passed"}
    assert {"argument-rules", "fenced-transcripts", "two-handles"} <= ran, not_run
    left = sorted(p.name for p in Path(installed["TMPDIR"]).iterdir())
    assert left == [], f"the certification left {left}"
