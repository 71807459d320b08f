"""Fixtures the file-store tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store root that does not exist yet (the store creates it on first write)."""
    return tmp_path / "root"
