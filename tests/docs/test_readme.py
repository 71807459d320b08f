"""The README's Python examples run as a user runs them (blocks marked illustrative excepted).

Each block is written to a file and run in a fresh ``python`` process, twice in a
row in one working directory, as a reader who copies it into ``example.py``
would: ``exec`` inside pytest hides what only a real ``__main__`` shows (a
spawned child re-importing a script without its ``if __name__ == "__main__":``
guard). A block that is a pytest module (it defines ``test_`` functions) runs
under ``python -m pytest``, as its text says it is meant to.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ILLUSTRATIVE = "<!-- illustrative"
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.DOTALL)
TEST_FUNCTION = re.compile(r"^def test_", re.MULTILINE)


def _runnable_blocks(text: str | None = None) -> list[str]:
    text = README.read_text(encoding="utf-8") if text is None else text
    return [
        match["code"]
        for match in BLOCK.finditer(text)
        if not match["before"].startswith(ILLUSTRATIVE)
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


def test_readme_has_runnable_examples() -> None:
    assert len(_runnable_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_runnable_blocks())))
def test_readme_example_runs_twice_in_a_row_as_a_file(
    index: int, tmp_path: Path
) -> None:
    """A reader runs an example file, then runs it again: both runs must work.

    Both runs share one working directory, so an example that leaves state behind
    (a database file) and trips over it the second time fails here.
    """
    code = _runnable_blocks()[index]
    for attempt in range(2):
        done = run_block(code, tmp_path, f"readme_example_{index}")
        assert done.returncode == 0, (
            f"README block {index}, run {attempt + 1}:\n{done.stdout}\n{done.stderr}"
        )


def test_an_example_without_its_main_guard_fails_as_a_file(tmp_path: Path) -> None:
    """The check the old ``exec`` runner could not make: the guard-less factory fails.

    The SQLite location-factory example without ``if __name__ == "__main__":``
    re-runs itself in its spawned child; the cross-process check then does not
    run, and the example's own assertion (nothing NOT RUN) fails the file.
    """
    (factory,) = [code for code in _runnable_blocks() if "def fresh_location" in code]
    head, guarded = factory.split('if __name__ == "__main__":', 1)
    body = "\n".join(line.removeprefix("    ") for line in guarded.splitlines()[1:])
    done = run_block(head + body, tmp_path, "unguarded")
    assert done.returncode != 0
    assert "two-handles-across-processes" in done.stderr
