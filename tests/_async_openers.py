"""The asyncio stores the core SPI tests run an optional operation through.

Native SQLite, the generic adapter over memory, and native PostgreSQL (gated by
``_postgres_gate``: skipped locally without a server, failed under CI=true),
each opened fresh in the test's temporary folder or its own schema, which is
dropped afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import AsyncOpenedStore, open_store, open_store_async
from rulvar_store.backend import adapt_opened
from tests._postgres_gate import postgres_url

__all__ = ["AsyncOpener", "async_store_params"]

AsyncOpener = Callable[[Path], AbstractAsyncContextManager[AsyncOpenedStore]]


@asynccontextmanager
async def _native_sqlite(tmp: Path) -> AsyncIterator[AsyncOpenedStore]:
    async with open_store_async(f"sqlite:///{tmp / 'a.db'}") as opened:
        yield opened


@asynccontextmanager
async def _adapted_memory(tmp: Path) -> AsyncIterator[AsyncOpenedStore]:
    served = adapt_opened(open_store("memory://"))
    try:
        yield served
    finally:
        await served.aclose()


def _native_postgres(schema_prefix: str) -> AsyncOpener:
    @asynccontextmanager
    async def opened_in_own_schema(tmp: Path) -> AsyncIterator[AsyncOpenedStore]:
        import psycopg

        url = postgres_url()
        schema = f"{schema_prefix}_{tmp.name[-12:].replace('-', '_').lower()}"
        try:
            async with open_store_async(f"{url}?schema={schema}") as opened:
                yield opened
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return opened_in_own_schema


def async_store_params(schema_prefix: str) -> list[Any]:
    """``pytest.param``s of the three openers; PostgreSQL schemas start with ``schema_prefix``."""
    return [
        pytest.param(_native_sqlite, id="sqlite"),
        pytest.param(_adapted_memory, id="adapter-memory"),
        pytest.param(
            _native_postgres(schema_prefix), id="postgres", marks=pytest.mark.postgres
        ),
    ]
