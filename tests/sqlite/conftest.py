"""Fixtures for SqliteStore tests: temp files, an injected clock, two handles.

pytest runs with --import-mode=importlib and tests/ is no package, so the project
root goes on sys.path: test modules then import their helpers by the same dotted
name mypy gives them (``tests.sqlite._sqlite_support``, explicit package bases).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from rulvar_store_sqlite import SqliteStore  # noqa: E402  (after the path setup)
from tests.sqlite._sqlite_support import Clock  # noqa: E402  (needs the path above)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
def store(db_path: str, clock: Clock) -> Iterator[SqliteStore]:
    """Instance A over a fresh file, ttl 100 ms on the injected clock."""
    with SqliteStore(db_path, ttl_ms=100, now=clock) as opened:
        yield opened


@pytest.fixture
def other(db_path: str, clock: Clock, store: SqliteStore) -> Iterator[SqliteStore]:
    """Instance B over the same file and clock (another 'process')."""
    with SqliteStore(db_path, ttl_ms=100, now=clock) as opened:
        yield opened
