"""PostgreSQL (psycopg 3) backend: journals, metas, leases, epochs and blobs in one schema.

``PostgresStore`` is fenced (``fenced_writes``), leasable and meta-lookup; its
``transcripts()`` twin stores blobs in the same schema under the same fence.
``AsyncPostgresStore`` is the same store for asyncio callers (``async_api``).
Importing this package does not import psycopg (the plugin module must load
without the ``postgres`` extra); the store classes load on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rulvar_store.errors import MissingExtraError

if TYPE_CHECKING:
    from rulvar_store_postgres._async_store import (
        AsyncPostgresFencedTranscriptStore,
        AsyncPostgresStore,
    )
    from rulvar_store_postgres._store import PostgresStore
    from rulvar_store_postgres._transcripts import PostgresFencedTranscriptStore

__all__ = [
    "AsyncPostgresFencedTranscriptStore",
    "AsyncPostgresStore",
    "PostgresFencedTranscriptStore",
    "PostgresStore",
]


def __getattr__(name: str) -> Any:
    try:
        return _load(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in _DRIVERS:
            raise
        # As open_store says it: which extra, not a bare "No module named 'psycopg'".
        raise MissingExtraError(
            f"{__name__}.{name} needs {exc.name}, which is not installed: pip install "
            "'rulvar-stores[postgres]' (in a checkout: pip install -e '.[postgres]')",
            exc.name,
        ) from None


_DRIVERS = ("psycopg", "psycopg_pool")


def _load(name: str) -> Any:
    if name in ("AsyncPostgresStore", "AsyncPostgresFencedTranscriptStore"):
        from rulvar_store_postgres import _async_store

        return getattr(_async_store, name)
    if name == "PostgresStore":
        from rulvar_store_postgres._store import PostgresStore

        return PostgresStore
    if name == "PostgresFencedTranscriptStore":
        from rulvar_store_postgres._transcripts import PostgresFencedTranscriptStore

        return PostgresFencedTranscriptStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names too, so ``dir()`` and the API reference (autodoc) list them.
    return sorted([*globals(), *__all__])
