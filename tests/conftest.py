"""Project-wide test wiring: contract clause ids become `-k` keywords."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let `pytest -k J6` select every test marked `@pytest.mark.clause("J6")`."""
    for item in items:
        for marker in item.iter_markers(name="clause"):
            item.extra_keyword_matches.update(str(arg) for arg in marker.args)
