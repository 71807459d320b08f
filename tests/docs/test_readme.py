"""The README's Python examples run as written (blocks marked illustrative excepted)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
ILLUSTRATIVE = "<!-- illustrative"
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def _runnable_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [
        match["code"]
        for match in BLOCK.finditer(text)
        if not match["before"].startswith(ILLUSTRATIVE)
    ]


def test_readme_has_runnable_examples() -> None:
    assert len(_runnable_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(_runnable_blocks())))
def test_readme_example_runs_twice_in_a_row(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader runs an example, then runs it again: both runs must work.

    Both runs share one working directory, so an example that leaves state behind
    (a database file) and trips over it the second time fails here.
    """
    monkeypatch.chdir(tmp_path)
    code = compile(_runnable_blocks()[index], f"README.md[{index}]", "exec")
    for attempt in range(2):
        namespace: dict[str, Any] = {"__name__": f"readme_example_{index}_{attempt}"}
        exec(code, namespace)
        # A block that builds conformance suites is only proven by running them.
        for suite in namespace.get("SUITES", []):
            suite.run()
