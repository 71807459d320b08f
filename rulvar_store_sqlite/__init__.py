"""SQLite (apsw) backend: one file holds journals, metas, leases, epochs and blobs.

``SqliteStore`` is fenced (``fenced_writes``), leasable and meta-lookup; its
``transcripts()`` twin stores blobs in the same file under the same fence.
``AsyncSqliteStore`` is its asyncio twin: the same operations through the same
door, coroutines sharing group commit.

Names are resolved lazily (PEP 562), so importing the package, as the plugin
registry does through ``rulvar_store_sqlite._plugin``, never imports apsw.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rulvar_store.errors import MissingExtraError

if TYPE_CHECKING:
    from rulvar_store_sqlite._async_store import (
        AsyncSqliteStore,
        AsyncSqliteTranscriptStore,
    )
    from rulvar_store_sqlite._boot import BOOT_BUSY_TIMEOUT_MS
    from rulvar_store_sqlite._options import DEFAULT_BUSY_TIMEOUT_MS
    from rulvar_store_sqlite._store import SqliteStore
    from rulvar_store_sqlite._transcripts import SqliteFencedTranscriptStore

__all__ = [
    "BOOT_BUSY_TIMEOUT_MS",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "AsyncSqliteStore",
    "AsyncSqliteTranscriptStore",
    "SqliteFencedTranscriptStore",
    "SqliteStore",
]

_HOMES = {
    "AsyncSqliteStore": "rulvar_store_sqlite._async_store",
    "AsyncSqliteTranscriptStore": "rulvar_store_sqlite._async_store",
    "BOOT_BUSY_TIMEOUT_MS": "rulvar_store_sqlite._boot",
    "DEFAULT_BUSY_TIMEOUT_MS": "rulvar_store_sqlite._options",
    "SqliteFencedTranscriptStore": "rulvar_store_sqlite._transcripts",
    "SqliteStore": "rulvar_store_sqlite._store",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(home)
    except ModuleNotFoundError as exc:
        if exc.name != "apsw":
            raise
        # As open_store says it: which extra, not a bare "No module named 'apsw'".
        raise MissingExtraError(
            f"{__name__}.{name} needs apsw, which is not installed: pip install "
            "'rulvar-stores[sqlite]' (in a checkout: pip install -e '.[sqlite]')",
            "apsw",
        ) from None
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
