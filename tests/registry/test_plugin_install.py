"""A third-party backend is found through its entry point once pip-installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pip_target import install_into

PLUGIN_SOURCE = Path(__file__).resolve().parent.parent / "plugin_dist"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Install the example plugin into a private directory; return the env that sees it."""
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    shutil.copytree(PLUGIN_SOURCE, source)  # builds write into the source tree
    site = work / "site"
    install_into(source, site)
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


@pytest.mark.clause("C4")
def test_isolate_fails_the_check_that_crashed_its_process_and_runs_the_rest(
    plugin_site: dict[str, str],
) -> None:
    """--isolate: a segfault inside get_meta is one FAIL row naming SIGSEGV."""
    result = _rulvar(
        plugin_site, "check", "crashing-example://", "--suite", "journal", "--isolate"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    rows = {
        line.split()[2]: line.split()[0]
        for line in result.stdout.splitlines()
        if line.startswith("  ")
        and len(line.split()) > 2
        and line.split()[0] in ("PASS", "FAIL")
    }
    assert rows["meta-separation"] == "FAIL"
    assert rows["a1-append-atomicity"] == "PASS"
    assert rows["abandon-derived-skip"] == "PASS"  # the checks after the crash ran
    assert "died by SIGSEGV" in result.stdout  # the child's last words follow


def test_a_crash_without_isolate_names_the_running_check(
    plugin_site: dict[str, str],
) -> None:
    """The process dies, but the stack it leaves names the check that was running.

    Piped, the command prints no line per check (issue 38: hundreds of them);
    the crash's stack (faulthandler) carries the check's name in a frame.
    """
    result = _rulvar(plugin_site, "check", "crashing-example://", "--suite", "journal")
    assert result.returncode == -11  # SIGSEGV: nothing could catch it
    assert "in running journal meta-separation" in result.stderr, result.stderr
    assert "rulvar check: running" not in result.stderr


def test_a_plugin_whose_certify_raises_exits_2_under_pytest(
    plugin_site: dict[str, str], tmp_path: Path
) -> None:
    """The plugin's own bug stops the session with exit 2, in one line."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in plugin_site.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rulvar-store=buggy-certify-example://",
            "-q",
            "-k",
            "a1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    shown = result.stdout + result.stderr
    assert "backend 'buggy-certify-example' failed in its own certify()" in shown
    assert "RuntimeError: scratch folder setting missing" in shown


def test_check_of_a_plugin_whose_certify_raises_exits_2(
    plugin_site: dict[str, str],
) -> None:
    result = _rulvar(plugin_site, "check", "buggy-certify-example://")
    assert result.returncode == 2
    assert "failed in its own certify()" in result.stderr
    assert "Traceback" not in result.stderr


def test_stores_shows_what_to_install_for_a_missing_driver(
    plugin_site: dict[str, str],
) -> None:
    """A backend whose driver is missing says so, in the table and in JSON."""
    hint = (
        "needs rulvar_example_missing_driver, which is not installed: "
        "install rulvar_example_missing_driver"
    )
    table = _rulvar(plugin_site, "stores")
    assert table.returncode == 0, table.stderr
    line = next(
        line
        for line in table.stdout.splitlines()
        if "missing-driver-example://" in line
    )
    assert f"(not usable: {hint})" in line
    listed = _rulvar(plugin_site, "stores", "--json")
    rows = {row["name"]: row for row in json.loads(listed.stdout)["backends"]}
    assert rows["missing-driver-example"]["install"] == hint
    assert rows["example"]["install"] is None
