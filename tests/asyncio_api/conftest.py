"""URLs of one fresh store per backend, for the asyncio API tests."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests._postgres_gate import postgres_url

BACKENDS = ("memory", "file", "sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL naming a fresh, empty store of each backend."""
    backend = request.param
    if backend == "memory":
        yield "memory://"
    elif backend == "file":
        yield f"file://{tmp_path / 'runs'}"
    elif backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        server = postgres_url()
        schema = f"rulvar_async_{secrets.token_hex(6)}"
        yield f"{server}?schema={schema}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
