"""docs/guides/worker-life.md: every Python example runs as written, twice in a row.

Run the way the README's examples are (``tests/docs/test_readme.py``): each block
written to a file and run in a fresh ``python`` process, twice in one folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_readme import ROOT, _runnable_blocks, run_block

GUIDE = ROOT / "docs" / "guides" / "worker-life.md"
BLOCKS = _runnable_blocks(GUIDE.read_text(encoding="utf-8"))


def test_the_guide_has_its_four_examples() -> None:
    assert len(BLOCKS) == 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_guide_example_runs_twice_in_a_row_as_a_file(
    index: int, tmp_path: Path
) -> None:
    """The side effect done right, both pools' requeue and the resume after a crash."""
    for attempt in range(2):
        done = run_block(BLOCKS[index], tmp_path, f"worker_life_{index}")
        assert done.returncode == 0, (
            f"worker-life block {index}, run {attempt + 1}:\n{done.stdout}\n{done.stderr}"
        )
