"""A third-party backend is found through its entry point once pip-installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_SOURCE = Path(__file__).resolve().parent.parent / "plugin_dist"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Install the example plugin into a private directory; return the env that sees it."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    shutil.copytree(PLUGIN_SOURCE, source)  # builds write into the source tree
    site = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _rulvar(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_installed_plugin_is_listed_with_its_distribution(
    plugin_site: dict[str, str],
) -> None:
    result = _rulvar(plugin_site, "stores", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["backends"]}
    assert rows["example"]["distribution"] == "rulvar-example-plugin"
    assert rows["example"]["schemes"] == ["example"]
    assert rows["memory"]["distribution"] == "rulvar-stores"


def test_installed_plugin_opens_by_url(plugin_site: dict[str, str]) -> None:
    script = (
        "from rulvar_store import open_store\n"
        "with open_store('example://') as opened:\n"
        "    lease = opened.journal.acquire('r', 'me')\n"
        "    opened.journal.append('r', {'seq': 0}, lease)\n"
        "    print(opened.journal.load('r'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=plugin_site,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[{'seq': 0}]"


def test_honest_plugin_is_certified(plugin_site: dict[str, str]) -> None:
    result = _rulvar(plugin_site, "check", "example://", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["failed"] == 0


@pytest.mark.clause("C4")
def test_check_of_a_broken_plugin_fails_and_names_the_check(
    plugin_site: dict[str, str],
) -> None:
    """A backend that drops the lease on append fails fencing-stale-epoch, exit 1."""
    result = _rulvar(plugin_site, "check", "broken-example://")
    assert result.returncode == 1
    failing = [line for line in result.stdout.splitlines() if "FAIL" in line]
    assert any("fencing-stale-epoch" in line for line in failing), result.stdout
