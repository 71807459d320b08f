"""Fixtures for the intake tests: one rig per backend (see ``_rigs``).

pytest runs with --import-mode=importlib and tests/ is no package, so the project
root goes on sys.path and test modules import ``tests.intake._rigs``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.intake._rigs import BACKENDS, Rig, make_rig  # noqa: E402  (needs the path above)


@pytest.fixture(scope="module", params=BACKENDS)
def rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rig]:
    """One rig per backend, shared by a module's tests (they never change its state)."""
    yield from make_rig(request.param, tmp_path_factory)
