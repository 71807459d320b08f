"""The gates every submission passes: mypy --strict and ruff over the whole tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def test_mypy_strict_is_clean() -> None:
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_check_is_clean() -> None:
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is part of the dev extra"
    result = _run(ruff, "check", ".")
    assert result.returncode == 0, result.stdout[-4000:]
