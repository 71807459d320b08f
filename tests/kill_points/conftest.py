"""Fixtures for the kill-point tests: one kill-point suite per backend.

Each fixture certifies its backend (fresh files, directories or schemas per
check, all removed afterwards) and builds the suite once per module, so the
per-operation failpoint probe runs once. PostgreSQL comes from
``RULVAR_TEST_POSTGRES_URL`` (or ``RULVAR_POSTGRES_URL``): without it, or with
the server unreachable, its tests SKIP locally and FAIL under ``CI=true``,
exactly as in ``tests/postgres``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_conformance import Certification, ConformanceSuite
from rulvar_conformance.harness.async_certify import async_locations
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_store.backend import LocationFactory, parse_store_url, resolve_backend
from tests._postgres_gate import postgres_url as _postgres_url


def _suite_for(url: str, *, through_async: bool = False) -> Iterator[ConformanceSuite]:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        if through_async:
            # Each child opens its store through open_store_async behind the
            # kit's facade, so it dies inside an awaited call.
            locations = async_locations(locations)
        yield kill_point_conformance(Certification(locations, backend.capabilities))


@pytest.fixture(scope="module")
def sqlite_suite(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConformanceSuite]:
    """The kill-point suite over fresh SQLite files."""
    root: Path = tmp_path_factory.mktemp("kp-sqlite")
    yield from _suite_for(f"sqlite:///{root / 'kp.db'}")


@pytest.fixture(scope="module")
def sqlite_async_suite(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConformanceSuite]:
    """The kill-point suite over fresh SQLite files, children writing through asyncio."""
    root: Path = tmp_path_factory.mktemp("kp-sqlite-async")
    yield from _suite_for(f"sqlite:///{root / 'kp.db'}", through_async=True)


@pytest.fixture(scope="module")
def postgres_async_suite() -> Iterator[ConformanceSuite]:
    """The kill-point suite over fresh schemas, children writing through asyncio."""
    yield from _suite_for(_postgres_url(), through_async=True)


@pytest.fixture(scope="module")
def file_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConformanceSuite]:
    """The kill-point suite over fresh file-store directories."""
    root: Path = tmp_path_factory.mktemp("kp-file")
    yield from _suite_for(root.as_uri())


@pytest.fixture(scope="module")
def postgres_suite() -> Iterator[ConformanceSuite]:
    """The kill-point suite over fresh PostgreSQL schemas (skip/fail without a server)."""
    yield from _suite_for(_postgres_url())


@pytest.fixture
def postgres_locations() -> Iterator[LocationFactory]:
    """Fresh PostgreSQL schemas, dropped afterwards (skip/fail without a server)."""
    parsed = parse_store_url(_postgres_url())
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        yield locations


@pytest.fixture(scope="module")
def memory_suite() -> Iterator[ConformanceSuite]:
    """The kill-point suite over in-process memory domains (no child can open them)."""
    yield from _suite_for("memory://")
