"""Registers the ``sqlite://`` backend; apsw is imported only when a store opens.

URLs: ``sqlite:///relative.db`` (relative to the working directory),
``sqlite:////absolute/path.db``, ``sqlite://:memory:``; options in the query
string or as keywords: ``ttl_ms``, ``busy_timeout_ms``, ``synchronous``,
``readonly`` (open the existing file read-only, for observers),
``group_commit`` (default true), ``private`` (default true: a new database
file is created owner-only).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, unquote

from rulvar_store import DEFAULT_LEASE_TTL_MS, AsyncOpenedStore, OpenedStore
from rulvar_store.backend import (
    Backend,
    LocationFactory,
    StoreLocation,
    StoreUrl,
    UrlOpener,
    hookimpl,
    option_bool,
    option_int,
)
from rulvar_store.errors import ConfigError

if TYPE_CHECKING:
    from rulvar_store_sqlite._store import SqliteStore

__all__ = ["rulvar_store_backends"]

_MEMORY: Final = ":memory:"
_OPTIONS: Final = frozenset(
    {
        "ttl_ms",
        "busy_timeout_ms",
        "synchronous",
        "now",
        "readonly",
        "group_commit",
        "private",
    }
)
# A fail-fast handle (kit contention checks) gives up on a held write lock quickly.
_FAIL_FAST_BUSY_TIMEOUT_MS: Final = 100
# Mirrors rulvar_store_sqlite._options.DEFAULT_BUSY_TIMEOUT_MS without importing it
# (that module is cheap, but this one must stay importable without the extra).
_DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000


@dataclass(frozen=True, slots=True)
class _Target:
    path: str  # ':memory:' or a filesystem path
    options: dict[str, Any]


def _target(url: StoreUrl) -> _Target:
    unknown = set(url.options) - _OPTIONS
    if unknown:
        raise ConfigError(
            f"sqlite:// takes only {', '.join(sorted(_OPTIONS - {'now'}))} "
            f"(and now= as a keyword), not {', '.join(sorted(unknown))}"
        )
    netloc, path = url.parts.netloc, unquote(url.parts.path)
    if netloc == _MEMORY and path == "":
        location = _MEMORY
    elif netloc == "" and path.startswith("/") and len(path) > 1:
        # sqlite:///runs.db -> 'runs.db' (relative); sqlite:////abs.db -> '/abs.db'
        location = path[1:]
    else:
        raise ConfigError(
            f"sqlite:// URL {url.redacted!r} names no database: use "
            "'sqlite:///relative.db', 'sqlite:////absolute/path.db' or "
            "'sqlite://:memory:'"
        )
    options = {
        "ttl_ms": option_int(url.options, "ttl_ms", DEFAULT_LEASE_TTL_MS),
        "busy_timeout_ms": option_int(
            url.options, "busy_timeout_ms", _DEFAULT_BUSY_TIMEOUT_MS
        ),
        "synchronous": url.options.get("synchronous", "FULL"),
    }
    if "readonly" in url.options:
        options["readonly"] = option_bool(url.options, "readonly", False)
    if "group_commit" in url.options:
        options["group_commit"] = option_bool(url.options, "group_commit", True)
    if "private" in url.options:
        options["private"] = option_bool(url.options, "private", True)
    if url.options.get("now") is not None:
        options["now"] = url.options["now"]  # a keyword only; SqliteStore checks it
    return _Target(location, options)


_SQLITE_HEADER: Final = b"SQLite format 3\x00"


def _check_location(path: str, options: dict[str, Any]) -> None:
    """Validate options and the database path the way opening would, touching nothing.

    Opening through apsw reports a missing folder, a directory or a foreign file
    as a bare "unable to open database file"; this names the path and the reason
    first, and ``rulvar check`` runs it before any check, with no side effects.

    Raises:
        ConfigError: a bad option, a missing folder, a directory, or an existing
            file that is not a SQLite database or cannot be read and written.
    """
    from rulvar_store_sqlite._options import validate_options

    validate_options(path, **{"now": None, **options})
    if path == _MEMORY:
        return
    database = os.path.abspath(path)
    folder = os.path.dirname(database)
    if not os.path.isdir(folder):
        raise ConfigError(
            f"sqlite database {database}: the folder {folder} does not exist "
            "(create it first)"
        )
    if os.path.isdir(database):
        raise ConfigError(f"sqlite database {database} is a directory, not a file")
    if not os.path.exists(database):
        return
    try:
        with open(database, "rb") as file:
            header = file.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise ConfigError(
            f"sqlite database {database} cannot be read: {exc.strerror or exc}"
        ) from exc
    if header and header != _SQLITE_HEADER:
        raise ConfigError(f"sqlite database {database} is not a SQLite database file")
    if not os.access(database, os.R_OK | os.W_OK):
        raise ConfigError(f"sqlite database {database} is not readable and writable")


def _opened(store: SqliteStore) -> OpenedStore:
    return OpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.close,)
    )


def _open_at(path: str, options: dict[str, Any]) -> OpenedStore:
    from rulvar_store_sqlite._store import SqliteStore

    return _opened(SqliteStore(path, **options))


def _open(url: StoreUrl) -> OpenedStore:
    target = _target(url)
    _check_location(target.path, target.options)
    return _open_at(target.path, target.options)


async def _open_async(url: StoreUrl) -> AsyncOpenedStore:
    from rulvar_store_sqlite._async_store import AsyncSqliteStore

    target = _target(url)
    _check_location(target.path, target.options)
    store = await AsyncSqliteStore.open(target.path, **target.options)
    return AsyncOpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.aclose,)
    )


def _remove_database(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with suppress(FileNotFoundError):
            os.remove(path + suffix)


@contextmanager
def _certify(url: StoreUrl) -> Iterator[LocationFactory]:
    """Yield fresh locations, each a new database file in one scratch directory.

    The directory sits next to the URL's database (so the checks exercise the same
    filesystem), or in the system temp dir for ``:memory:``; it is removed, with
    everything in it, on exit.

    Raises:
        ConfigError: the URL, an option or the database path is one that
            ``open_store`` would refuse (checked first, touching nothing).
    """
    target = _target(url)
    # The same validation as open_store, with no side effects: no folder is
    # created and the user's database is never opened.
    _check_location(target.path, target.options)
    parent = (
        None
        if target.path == _MEMORY
        else os.path.dirname(os.path.abspath(target.path))
    )
    try:
        scratch = tempfile.mkdtemp(prefix="rulvar-check-", dir=parent)
    except OSError as exc:
        raise ConfigError(
            f"sqlite database {target.path}: cannot create a scratch folder in "
            f"{parent or 'the temp dir'}: {exc.strerror or exc}"
        ) from exc
    numbers = count()
    options = {key: value for key, value in target.options.items() if key != "now"}

    def fresh() -> StoreLocation:
        path = os.path.join(scratch, f"store-{next(numbers)}.db")
        return StoreLocation(
            name=path,
            opener=UrlOpener(
                "sqlite:///" + quote(path),
                options,
                {"busy_timeout_ms": _FAIL_FAST_BUSY_TIMEOUT_MS},
            ),
            contention=True,
            cleanup=lambda: _remove_database(path),
        )

    try:
        yield fresh
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return [
        Backend(
            name="sqlite",
            schemes=("sqlite",),
            open=_open,
            open_async=_open_async,
            capabilities=frozenset(
                {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
            ),
            requires=("apsw",),
            extra="sqlite",
            certify=_certify,
            description="one SQLite file (apsw, WAL); fenced; many processes on one host",
        )
    ]
