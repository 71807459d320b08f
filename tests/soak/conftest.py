"""Fixtures for the soak tests: the project root on sys.path, locations per backend.

The root goes on sys.path so test modules import their helpers by dotted name
(``tests.soak.seeded_defects``) and the soak's writer processes, which inherit
the referee's import path, can unpickle openers defined there. PostgreSQL comes
from ``RULVAR_TEST_POSTGRES_URL``: without it the PostgreSQL soak tests skip
locally and fail under ``CI=true``, like tests/postgres.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from rulvar_store.backend import (  # noqa: E402  (after the path setup)
    LocationFactory,
    parse_store_url,
    resolve_backend,
)
from tests._postgres_gate import postgres_url  # noqa: E402  (after the path setup)


@pytest.fixture
def sqlite_locations(tmp_path: Path) -> Iterator[LocationFactory]:
    """Fresh SQLite files in this test's directory, as ``rulvar soak`` would make them."""
    parsed = parse_store_url(f"sqlite:///{tmp_path / 'soak.db'}")
    certify = resolve_backend(parsed).certify
    assert certify is not None
    with certify(parsed) as fresh:
        yield fresh


@pytest.fixture
def postgres_locations() -> Iterator[LocationFactory]:
    """Fresh schemas on the test server, dropped afterwards."""
    parsed = parse_store_url(postgres_url())
    certify = resolve_backend(parsed).certify
    assert certify is not None
    with certify(parsed) as fresh:
        yield fresh
