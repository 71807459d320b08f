"""Fixtures for the PostgreSQL store tests: a server URL and fresh schemas.

Test modules cannot import this file (pytest runs with --import-mode=importlib),
so everything they share is a fixture.

The server comes from ``RULVAR_TEST_POSTGRES_URL`` (``RULVAR_POSTGRES_URL``, the
contract's name, is accepted too). Without it, or with the server unreachable,
the tests SKIP locally with the reason; under ``CI=true`` they FAIL instead, so a
CI job can never go green by silently skipping the fleet backend. Every test
works in its own randomly named schema, dropped (CASCADE) afterwards, and every
store it opens is closed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.sql
import pytest

from rulvar_store_postgres import PostgresStore
from tests._postgres_gate import URL_ENV_VARS as URL_ENV_VARS
from tests._postgres_gate import postgres_url as server_url


def new_schema_name(prefix: str = "rulvar_t") -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


def drop_schemas(url: str, schemas: list[str]) -> None:
    if not schemas:
        return
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of the test server (skips locally / fails under CI when missing)."""
    return server_url()


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain autocommit connection for inspecting what the stores wrote."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A fresh schema name for this test; dropped afterwards."""
    name = new_schema_name()
    yield name
    drop_schemas(pg_url, [name])


StoreFactory = Callable[..., PostgresStore]


@pytest.fixture
def make_store(pg_url: str, schema: str) -> Iterator[StoreFactory]:
    """Open stores on this test's schema (keywords pass through); all closed after."""
    stores: list[PostgresStore] = []

    def make(**options: Any) -> PostgresStore:
        options.setdefault("schema", schema)
        store = PostgresStore(pg_url, **options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def new_schema(pg_url: str) -> Iterator[Callable[[], str]]:
    """Hand out further fresh schema names; every one is dropped afterwards."""
    names: list[str] = []

    def make() -> str:
        names.append(new_schema_name())
        return names[-1]

    yield make
    drop_schemas(pg_url, names)


RoleFactory = Callable[..., str]
_ROLE_GRANTS_LOCK = 0x726F6C65  # advisory lock key: one role grant at a time


@pytest.fixture
def make_role(pg_url: str) -> Iterator[RoleFactory]:
    """Create real login roles (a password, a connection limit); dropped afterwards.

    Each role may create schemas in the database. Its sessions are ended and
    everything it owns is dropped before the role itself.
    """
    names: list[str] = []

    def make(password: str, connection_limit: int = -1) -> str:
        name = new_schema_name("rulvar_role")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL(
                    "CREATE ROLE {} LOGIN PASSWORD {} CONNECTION LIMIT {}"
                ).format(
                    psycopg.sql.Identifier(name),
                    psycopg.sql.Literal(password),
                    psycopg.sql.Literal(connection_limit),
                )
            )
            names.append(name)
            database = conn.info.dbname
            # Grants on the database rewrite its catalog row: tests running in
            # parallel take turns ("tuple concurrently updated" otherwise).
            conn.execute("SELECT pg_advisory_lock(%s)", (_ROLE_GRANTS_LOCK,))
            conn.execute(
                psycopg.sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                    psycopg.sql.Identifier(database), psycopg.sql.Identifier(name)
                )
            )
        return name

    yield make
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_ROLE_GRANTS_LOCK,))
        for name in names:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE usename = %s",
                (name,),
            )
            role = psycopg.sql.Identifier(name)
            conn.execute(psycopg.sql.SQL("DROP OWNED BY {} CASCADE").format(role))
            conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(role))
