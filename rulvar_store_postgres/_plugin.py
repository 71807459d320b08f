"""Registers the ``postgresql://`` backend; psycopg is imported only when a store opens.

URLs: ``postgresql://user@host:5432/db`` (or ``postgres://``), libpq parameters
in the query string as usual, plus the store's own options, which are stripped
before libpq sees the URL: ``schema``, ``ttl_ms``, ``pool_max_size`` (alias
``max_size``), ``lock_timeout_ms``, ``idle_in_transaction_timeout_ms``,
``connect_timeout_s``, ``call_timeout_ms``, ``readonly``, ``prepared_statements``,
``replication``. Keyword options of ``open_store`` win over the query. Every
spelling libpq accepts opens (several hosts, no host, Unix sockets, ``key=value``
strings: ``_conninfo``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import count
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rulvar_store import AsyncOpenedStore, OpenedStore
from rulvar_store.backend import (
    Backend,
    LocationFactory,
    NetworkRoute,
    StoreLocation,
    StoreUrl,
    UrlOpener,
    hookimpl,
)
from rulvar_store.errors import ConfigError
from rulvar_store_postgres._config import (
    OPTION_NAMES,
    SCHEMES,
    Settings,
    resolve_settings,
)

if TYPE_CHECKING:
    from rulvar_store_postgres._store import PostgresStore

__all__ = ["rulvar_store_backends"]


def _store_options(url: StoreUrl) -> dict[str, Any]:
    """Our options from ``url`` (query and keywords); unknown keywords are refused."""
    in_query = {key for key, _ in parse_qsl(url.parts.query, keep_blank_values=True)}
    if "now" in in_query:
        raise ConfigError(
            "postgresql:// takes now= (a clock) as a keyword, not in the URL"
        )
    unknown = set(url.options) - OPTION_NAMES - in_query - {"now"}
    if unknown:
        raise ConfigError(
            f"postgresql:// takes only {', '.join(sorted(OPTION_NAMES))} as options "
            f"(libpq parameters go in the URL's query string), not "
            f"{', '.join(sorted(unknown))}"
        )
    return {
        key: value
        for key, value in url.options.items()
        if key in OPTION_NAMES or key == "now"
    }


def _opened(store: PostgresStore) -> OpenedStore:
    return OpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.close,)
    )


def _open_with(url: StoreUrl, options: dict[str, Any]) -> OpenedStore:
    from rulvar_store_postgres._store import PostgresStore

    return _opened(PostgresStore(url.raw, **options))


def _open(url: StoreUrl) -> OpenedStore:
    return _open_with(url, _store_options(url))


async def _open_async(url: StoreUrl) -> AsyncOpenedStore:
    from rulvar_store_postgres._async_store import AsyncPostgresStore

    store = AsyncPostgresStore(url.raw, **_store_options(url))
    return AsyncOpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.aclose,)
    )


def _drop_schemas(
    settings: Settings,
    schemas: Sequence[str],
    operation: str = "drop check schemas",
) -> None:
    import psycopg

    from rulvar_store_postgres._errors import translated
    from rulvar_store_postgres._schema import Sql

    conninfo, connect_timeout_s = settings.conninfo, settings.connect_timeout_s
    with (
        translated(operation, settings.where, settings.secrets),
        psycopg.connect(
            conninfo, autocommit=True, connect_timeout=connect_timeout_s
        ) as conn,
    ):
        for schema in schemas:
            conn.execute(Sql(schema).drop)


# A fail-fast handle (kit contention checks) gives up on a held run lock quickly.
_FAIL_FAST_LOCK_TIMEOUT_MS = 200


def _route(
    raw: str, settings: Settings, opener: Callable[[str], UrlOpener]
) -> NetworkRoute | None:
    """The server's TCP address, and openers that reach it at another address.

    ``None`` for a Unix socket (no TCP link to stall) or several hosts.
    """
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(settings.conninfo)
    host, port = str(given.get("host", "")), str(given.get("port", "5432"))
    if not host or host.startswith("/") or "," in host or not port.isdigit():
        return None

    def via(new_host: str, new_port: int) -> UrlOpener:
        return opener(_rerouted(raw, new_host, new_port))

    return NetworkRoute(address=(host, int(port)), via=via)


def _rerouted(raw: str, host: str, port: int) -> str:
    """``raw`` with its host and port replaced (URL or key=value form)."""
    if "://" not in raw:
        return f"{raw} host={host} port={port}"  # later keywords win in libpq
    parts = urlsplit(raw)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def _certify(url: StoreUrl) -> Iterator[LocationFactory]:
    """Yield fresh locations, each a new schema of the URL's database.

    A location's schema is dropped (CASCADE) when it is removed, and every schema
    this certification made is dropped again on exit.
    """
    options = _store_options(url)
    options.pop("now", None)
    settings = resolve_settings(url.raw, options)  # P1 before anything connects
    # Connect once up front: an unreachable server, a refused login or a missing
    # database is one typed error naming the target, not 27 failed checks.
    _drop_schemas(settings, (), "connect")
    prefix = f"rulvar_check_{secrets.token_hex(4)}"
    numbers = count()
    schemas: list[str] = []

    def fresh() -> StoreLocation:
        schema = f"{prefix}_{next(numbers)}"
        schemas.append(schema)
        located = {**options, "schema": schema}
        fail_fast = {"lock_timeout_ms": _FAIL_FAST_LOCK_TIMEOUT_MS}
        return StoreLocation(
            name=f"{url.redacted} schema {schema}",
            opener=UrlOpener(url.raw, located, fail_fast),
            contention=True,
            cleanup=lambda: _drop_schemas(settings, (schema,)),
            route=_route(
                url.raw,
                settings,
                lambda raw: UrlOpener(raw, located, fail_fast),
            ),
        )

    try:
        yield fresh
    finally:
        if schemas:
            _drop_schemas(settings, schemas)


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return [
        Backend(
            name="postgresql",
            schemes=SCHEMES,
            open=_open,
            open_async=_open_async,
            capabilities=frozenset(
                {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
            ),
            requires=("psycopg", "psycopg_pool"),
            extra="postgres",
            certify=_certify,
            # Round trips and the server clock need more slack than an embedded store.
            certify_expiry_ttl_ms=1200,
            description=(
                "one PostgreSQL schema (psycopg 3, pooled); fenced; many hosts, "
                "one write region; lease time from the server clock"
            ),
        )
    ]
