"""Project-wide test wiring: contract clause ids become `-k` keywords."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Test helpers import each other as ``tests.<area>.<module>``. With
# --import-mode=importlib pytest puts nothing on sys.path, so the project root goes
# there once, here, for plain ``pytest`` as well as ``python -m pytest``.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let `pytest -k J6` select every test marked `@pytest.mark.clause("J6")`."""
    for item in items:
        for marker in item.iter_markers(name="clause"):
            item.extra_keyword_matches.update(str(arg) for arg in marker.args)
