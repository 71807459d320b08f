"""The ``file:///dir`` backend: JSONL journals and file blobs, single-writer (T8, T9)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from urllib.parse import unquote

from rulvar_store._location_records import LocationFactory, OpenedStore, StoreLocation
from rulvar_store._locations import UrlOpener
from rulvar_store._plugins import Backend, hookimpl
from rulvar_store._urls import StoreUrl, option_bool
from rulvar_store.errors import ConfigError

__all__ = ["rulvar_store_backends"]


def _root(url: StoreUrl) -> Path:
    if url.parts.netloc not in ("", "localhost"):
        raise ConfigError(
            f"file:// URLs name a local directory, got host {url.parts.netloc!r}: "
            "use file:///absolute/path"
        )
    path = unquote(url.parts.path)
    if not path.startswith("/"):
        raise ConfigError(f"file:// needs an absolute path, got {url.redacted!r}")
    return Path(path)


def _open_at(root: Path, repair: bool, private: bool = True) -> OpenedStore:
    # Imported here so that listing backends never pays for the file store modules.
    from rulvar_store._file_journal import JsonlFileStore
    from rulvar_store._file_transcripts import FileTranscriptStore

    journal = JsonlFileStore(root, repair=repair, private=private)
    transcripts = FileTranscriptStore(root, private=private)
    # Both are closed: a blob store left open would keep serving after close().
    return OpenedStore(
        journal=journal,
        transcripts=transcripts,
        closers=(transcripts.close, journal.close),
    )


def _open(url: StoreUrl) -> OpenedStore:
    unknown = set(url.options) - {"repair", "private"}
    if unknown:
        raise ConfigError(
            f"file:// takes only repair and private, not {', '.join(sorted(unknown))}"
        )
    return _open_at(
        _root(url),
        option_bool(url.options, "repair", True),
        option_bool(url.options, "private", True),
    )


def _nearest_directory(root: Path) -> Path:
    """The root if it exists, else its nearest existing ancestor (validated)."""
    from rulvar_store._file_io import resolve_root

    checked = resolve_root(root)  # ConfigError when a file is in the way
    while not checked.exists():
        checked = checked.parent
    return checked


@contextmanager
def _certify(url: StoreUrl) -> Iterator[LocationFactory]:
    """Yield fresh locations, each a new directory in one scratch directory.

    The URL is validated as ``open_store`` would, and nothing of the user's is
    created: the scratch directory sits inside the URL's directory, or inside
    its nearest existing ancestor when the directory does not exist yet, and is
    removed on exit.

    Raises:
        ConfigError: a bad URL or option, a file where the directory should be,
            or a place where no directory can be made.
    """
    _open(url).close()  # the same validation as open_store, without side effects
    parent = _nearest_directory(_root(url))
    try:
        scratch = Path(tempfile.mkdtemp(prefix="rulvar-check-", dir=parent))
    except OSError as exc:
        raise ConfigError(
            f"file:// store at {_root(url)}: cannot create a directory in {parent}: "
            f"{exc.strerror or exc}"
        ) from exc
    numbers = count()

    def fresh() -> StoreLocation:
        root = scratch / f"store-{next(numbers)}"
        return StoreLocation(
            name=str(root),
            opener=UrlOpener(root.as_uri()),
            clock=False,  # no leases, so nothing reads a clock
            cleanup=lambda: shutil.rmtree(root, ignore_errors=True),
        )

    try:
        yield fresh
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return [
        Backend(
            name="file",
            schemes=("file",),
            open=_open,
            capabilities=frozenset({"meta_lookup", "single_writer_files"}),
            certify=_certify,
            description="one directory per run: JSONL journal, meta and blobs; single-writer",
        )
    ]
