"""Every Python example of the README and the docs runs as a user runs it.

Each ```python block of README.md and of every docs/**/*.md page (blocks marked
``<!-- illustrative: why -->`` excepted, and the plugin example, which
tests/docs/test_plugin_example.py installs as a distribution) is written to a
file and run in a fresh ``python`` process, twice in a row in one working
directory, as a reader who copies it into ``example.py`` would: ``exec`` inside
pytest hides what only a real ``__main__`` shows (a spawned child re-importing a
script without its ``if __name__ == "__main__":`` guard). A block that is a
pytest module (it defines ``test_`` functions) runs under ``python -m pytest``,
as its text says it is meant to.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._pages import ROOT, Block, blocks

TEST_FUNCTION = re.compile(r"^def test_", re.MULTILINE)
PLUGIN_EXAMPLE = "<!-- plugin example"


def _runnable_blocks() -> list[Block]:
    return [
        block
        for block in blocks("python")
        if not block.illustrative and not block.before.startswith(PLUGIN_EXAMPLE)
    ]


def run_block(code: str, folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    """Run one block the way a user would, in ``folder``; the completed process."""
    is_test_module = bool(TEST_FUNCTION.search(code))
    script = folder / (f"test_{name}.py" if is_test_module else f"{name}.py")
    script.write_text(code + "\n", encoding="utf-8")
    command = (
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name]
        if is_test_module
        else [sys.executable, script.name]
    )
    # Only the installed distribution, as a user has it: no project root on the path.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        command,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_the_readme_and_the_docs_have_runnable_examples() -> None:
    runnable = _runnable_blocks()
    assert any(block.page == "README.md" for block in runnable)
    assert len({block.page for block in runnable}) >= 8


def test_every_unrun_block_says_why() -> None:
    """An illustrative block names its reason: ``<!-- illustrative: why -->``."""
    for block in blocks("python"):
        if block.illustrative:
            assert re.match(r"<!-- illustrative: \S.* -->$", block.before), block.id


@pytest.mark.parametrize("block", _runnable_blocks(), ids=lambda block: block.id)
def test_example_runs_twice_in_a_row_as_a_file(block: Block, tmp_path: Path) -> None:
    """A reader runs an example file, then runs it again: both runs must work.

    Both runs share one working directory, so an example that leaves state behind
    (a database file) and trips over it the second time fails here.
    """
    name = re.sub(r"\W", "_", block.id)
    for attempt in range(2):
        done = run_block(block.code, tmp_path, name)
        assert done.returncode == 0, (
            f"{block.id}, run {attempt + 1}:\n{done.stdout}\n{done.stderr}"
        )


def _unleased_deletes(code: str) -> list[int]:
    """Lines of ``<x>.journal.delete(run)`` / ``store.delete(run)`` without a lease."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("delete", "delete_run")
            and len(node.args) < (3 if node.func.attr == "delete_run" else 2)
            and not any(keyword.arg == "lease" for keyword in node.keywords)
        ):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("block", _runnable_blocks(), ids=lambda block: block.id)
def test_no_example_deletes_a_run_without_a_lease(block: Block) -> None:
    """A delete without a lease removes a live worker's lease: allowed, never taught.

    (Issue 38, item 5: the audit example started afresh that way.)
    """
    assert _unleased_deletes(block.code) == [], block.id


def test_an_example_without_its_main_guard_fails_as_a_file(tmp_path: Path) -> None:
    """The check the old ``exec`` runner could not make: the guard-less factory fails.

    The SQLite location-factory example without ``if __name__ == "__main__":``
    re-runs itself in its spawned child; the cross-process check then does not
    run, and the example's own assertion (nothing NOT RUN) fails the file.
    """
    (factory,) = [
        block.code for block in _runnable_blocks() if "def fresh_location" in block.code
    ]
    head, guarded = factory.split('if __name__ == "__main__":', 1)
    body = "\n".join(line.removeprefix("    ") for line in guarded.splitlines()[1:])
    done = run_block(head + body, tmp_path, "unguarded")
    assert done.returncode != 0
    assert "two-handles-across-processes" in done.stderr


def test_the_pages_are_found_where_the_tests_look() -> None:
    assert (ROOT / "docs" / "index.md").is_file()
