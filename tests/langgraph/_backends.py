"""The backends the LangGraph saver tests run on."""

from __future__ import annotations

from typing import Final

import pytest

BACKENDS: Final = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]
"""Every backend: fresh locations come from each one's certify hook."""

SHARED: Final = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""Backends whose locations other processes can open (a memory domain cannot)."""
