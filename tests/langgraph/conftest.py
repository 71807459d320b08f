"""Fresh store locations of each backend for the LangGraph saver tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_store.backend import (
    LocationFactory,
    UrlOpener,
    parse_store_url,
    resolve_backend,
)
from tests._postgres_gate import postgres_url
from tests.langgraph._backends import BACKENDS


def backend_url(name: str, tmp_path: Path) -> str:
    """A URL of the backend beside which fresh locations are made."""
    if name == "memory":
        return "memory://"
    if name == "sqlite":
        return f"sqlite:///{tmp_path / 'lg.db'}"
    return postgres_url()


@pytest.fixture(params=BACKENDS)
def locations(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[LocationFactory]:
    """Fresh isolated locations (files, schemas, domains), removed afterwards."""
    parsed = parse_store_url(backend_url(request.param, tmp_path))
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as factory:
        yield factory


@pytest.fixture
def url_opener(locations: LocationFactory) -> Iterator[UrlOpener]:
    """One fresh location's URL and options, for savers in this and other processes."""
    location = locations()
    try:
        assert isinstance(location.opener, UrlOpener)
        yield location.opener
    finally:
        location.remove()
