"""The ``rulvar`` command as a user meets it: help texts, exit codes, JSON errors, words.

Each command's ``--help`` states that command's own exit codes; under ``--json``
stdout carries a JSON document even when the command fails; counts agree with
their nouns. The per-install behaviour (core only, ``[sqlite]``, ``[postgres]``)
is checked from built wheels in fresh venvs by ``ci/smoke_installs.sh``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_cli._common import plural
from rulvar_conformance.harness.certify import suite_specs
from rulvar_store import open_store
from tests.operator._journals import entry, settle, write_run
from tests.operator._places import invoke

ROOT = Path(__file__).resolve().parents[2]


def test_top_level_help_lists_exit_code_3() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    assert "3 the store did not answer within --timeout" in " ".join(
        result.stdout.split()
    )


def test_stores_help_states_no_check_failure_code() -> None:
    """``rulvar stores`` checks nothing, so its help has no 'a check failed'."""
    text = " ".join(invoke("stores", "--help").stdout.split())
    assert "Exit status: 0 listed; 2" in text
    assert "check failed" not in text


@pytest.mark.parametrize("command", ["list", "show"])
def test_runs_list_and_show_help_state_their_own_exit_codes(command: str) -> None:
    """Reading commands never repair: their help does not speak of divergences."""
    text = " ".join(invoke("runs", command, "--help").stdout.split())
    assert "Exit status:" in text
    assert "divergence" not in text
    assert "3 the store did not answer" in text


def test_check_help_lists_every_suite_name() -> None:
    text = invoke("check", "--help").stdout
    for spec in suite_specs():
        assert f"  {spec.name}  " in text, spec.name


def test_json_usage_error_prints_a_json_error_on_stdout() -> None:
    result = invoke("runs", "list", "nosuchscheme://x", "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["exit"] == 2
    assert error["code"] == "config"
    assert result.stderr.startswith("rulvar: config: ")


def test_json_unknown_run_prints_a_json_error_on_stdout(tmp_path: Path) -> None:
    result = invoke("runs", "show", f"file://{tmp_path}", "no-such-run", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "no-such-run"


def test_json_missing_option_value_prints_a_json_error_on_stdout() -> None:
    result = invoke("runs", "list", "--json", "--status")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "usage"


def test_without_json_a_failure_leaves_stdout_empty() -> None:
    result = invoke("runs", "list", "nosuchscheme://x")
    assert result.exit_code == 2
    assert result.stdout == ""


def test_one_run_is_counted_in_the_singular(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    with open_store(url) as opened:
        write_run(
            opened.journal, "run-one", [entry(0, "step", "ok"), settle(1, "ok")], "ok"
        )
    result = invoke("runs", "list", url)
    assert result.exit_code == 0, result.stderr
    assert result.stderr.strip() == "1 run"


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "checkpoint") == "1 checkpoint"
    assert plural(0, "checkpoint") == "0 checkpoints"
    assert plural(2, "run") == "2 runs"


def test_python_dash_m_rulvar_cli_runs_the_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "stores", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "backends" in json.loads(result.stdout)


def test_nothing_below_the_cli_imports_it() -> None:
    """The CLI sits above the core, the backends and the kit: no arrow points up."""
    below = [
        "rulvar_store",
        "rulvar_store_sqlite",
        "rulvar_store_postgres",
        "rulvar_conformance",
    ]
    offenders = [
        str(path.relative_to(ROOT))
        for package in below
        for path in (ROOT / package).rglob("*.py")
        if "rulvar_cli" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_soak_without_url_and_without_sqlite_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The branch a [postgres]-only install takes (the wheel smoke runs it for real)."""
    import rulvar_cli.soak

    monkeypatch.setattr(rulvar_cli.soak, "sqlite_installed", lambda: False)
    result = invoke("soak", "--profile", "quick")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "install the 'sqlite' extra" in result.stderr


def test_a_bug_in_a_plugins_certify_is_exit_2_naming_the_plugin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The plugin's own mistake is not a failed check of the store (exit 1)."""
    from contextlib import ExitStack, contextmanager

    from rulvar_cli.check import enter_certify
    from rulvar_store.backend import Backend, StoreUrl, parse_store_url

    @contextmanager
    def buggy_certify(url: StoreUrl):  # type: ignore[no-untyped-def]  # a plugin's code as written
        folder = url.options["folder"]  # the plugin's bug: no such option
        yield folder

    backend = Backend(
        name="buggy",
        schemes=("memory",),
        open=lambda url: None,  # type: ignore[arg-type,return-value]  # never opened here
        certify=buggy_certify,
    )
    with ExitStack() as stack, pytest.raises(SystemExit) as caught:
        enter_certify(backend, parse_store_url("memory://"), stack)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "backend 'buggy' failed in its own certify()" in err
    assert err.count("\n") == 1


def test_check_on_a_terminal_shows_which_check_is_running(tmp_path: Path) -> None:
    """Each check is named before it runs, so a crash that kills the process is attributable."""
    import os
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "check",
            "memory://",
            "--suite",
            "journal",
        ],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=300) == 0
    shown = b"".join(chunks).decode()
    assert "  RUN      journal              a1-append-atomicity\r" in shown
