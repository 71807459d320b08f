"""The ``file:///dir`` backend: JSONL journals and file blobs, single-writer (T8, T9)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from urllib.parse import unquote

from rulvar_store._locations import LocationFactory, StoreLocation, UrlOpener
from rulvar_store._plugins import Backend, OpenedStore, hookimpl
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


def _open_at(root: Path, repair: bool) -> OpenedStore:
    # Imported here so that listing backends never pays for the file store modules.
    from rulvar_store._file_journal import JsonlFileStore
    from rulvar_store._file_transcripts import FileTranscriptStore

    journal = JsonlFileStore(root, repair=repair)
    transcripts = FileTranscriptStore(root)
    return OpenedStore(
        journal=journal, transcripts=transcripts, closers=(journal.close,)
    )


def _open(url: StoreUrl) -> OpenedStore:
    unknown = set(url.options) - {"repair"}
    if unknown:
        raise ConfigError(
            f"file:// takes only repair, not {', '.join(sorted(unknown))}"
        )
    return _open_at(_root(url), option_bool(url.options, "repair", True))


@contextmanager
def _certify(url: StoreUrl) -> Iterator[LocationFactory]:
    """Yield fresh locations, each a new directory in one scratch directory.

    The scratch directory sits inside the URL's directory and is removed on exit.
    """
    parent = _root(url)
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="rulvar-check-", dir=parent))
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
            capabilities=frozenset({"meta_lookup"}),
            certify=_certify,
            description="one directory per run: JSONL journal, meta and blobs; single-writer",
        )
    ]
