"""Fresh locations of the real backends, as ``rulvar check`` makes them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_store.backend import LocationFactory, parse_store_url, resolve_backend


def _locations(url: str) -> Iterator[LocationFactory]:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as fresh:
        yield fresh


@pytest.fixture
def sqlite_locations(tmp_path: Path) -> Iterator[LocationFactory]:
    yield from _locations(f"sqlite:///{tmp_path / 'certify.db'}")


@pytest.fixture
def file_locations(tmp_path: Path) -> Iterator[LocationFactory]:
    root = tmp_path / "files"
    root.mkdir()
    yield from _locations(f"file://{root}")
