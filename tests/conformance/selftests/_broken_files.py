"""Broken file stores: the single-writer machinery with one piece missing (issue 22, class 6).

Each is the real ``JsonlFileStore`` (or its blob twin) with one plausible
shortcut; every in-process check of the kit passes them, since no process dies
there. Open them through ``file_locations``: the opener is a module-level
dataclass, so a spawned child opens the same broken store.

White-box: rulvar_store._file_io rulvar_store._intake rulvar_store._jsonl_file
"""

from __future__ import annotations

import os
import shutil
from contextlib import suppress
from dataclasses import dataclass, replace
from itertools import count
from pathlib import Path
from typing import Any

from rulvar_store import (
    BlobInput,
    Clock,
    FileTranscriptStore,
    JsonlFileStore,
    Lease,
    OpenedStore,
    RunMeta,
)
from rulvar_store._file_io import (
    JOURNAL_FILE,
    META_FILE,
    ensure_dir,
    run_dir,
    write_all,
)
from rulvar_store._intake import blob_bytes, meta_text
from rulvar_store._jsonl_file import ParsedJournal, parse_journal, read_all
from rulvar_store.backend import LocationFactory, StoreLocation, hit

__all__ = [
    "DeleteWithoutIntent",
    "InPlaceBlobs",
    "InPlaceMeta",
    "NoTornTailRepair",
    "file_locations",
]


def _write_in_place(path: Path, data: bytes) -> None:
    """Truncate and rewrite ``path`` where it is (the bug: no temp file, no rename)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class NoTornTailRepair(JsonlFileStore):  # type: ignore[misc]  # final; the bug is the point
    """Skips a torn last line when reading but never cuts it off the file.

    Loads look right; the next append lands after the torn bytes, and its line
    and theirs read as one torn line again: the new entry vanishes.
    """

    def _settle_tail(self, run_id: str, path: Path, fd: int) -> ParsedJournal:
        parsed = parse_journal(read_all(fd), run_id, path)
        self._tails.pop(run_id, None)
        return parsed


class InPlaceMeta(JsonlFileStore):  # type: ignore[misc]  # final; the bug is the point
    """Rewrites ``meta.json`` in place (truncate, write, fsync) instead of by rename."""

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        run_id, text = meta_text(meta)
        directory = run_dir(self.root, run_id)
        ensure_dir(directory, 0o700)
        _write_in_place(directory / META_FILE, (text + "\n").encode("utf-8"))


class InPlaceBlobs(FileTranscriptStore):  # type: ignore[misc]  # final; the bug is the point
    """Rewrites a blob's file in place instead of writing a temp file and renaming it."""

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        path = self._path(ref, "blob put")
        ensure_dir(path.parent, 0o700)
        _write_in_place(path, blob_bytes(blob, "blob put"))


class DeleteWithoutIntent(JsonlFileStore):  # type: ignore[misc]  # final; the bug is the point
    """Deletes a run by removing its meta, then its journal, with no intent file first.

    A death between the two removals leaves a journal without its meta: the run
    is unlisted, yet its entries load and its next incarnation inherits them.
    """

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        directory = run_dir(self.root, run_id)
        with self._lock:
            self._tails.pop(run_id, None)
            for name in (META_FILE, JOURNAL_FILE):
                with suppress(FileNotFoundError):  # already gone: the delete's goal
                    os.unlink(directory / name)
                if name == META_FILE:
                    hit("delete", "mid-write")


@dataclass(frozen=True)
class BrokenFileOpener:
    """Opens ``root`` with the given journal and blob classes (picklable for children)."""

    root: str
    journal: type[JsonlFileStore] = JsonlFileStore
    blobs: type[FileTranscriptStore] = FileTranscriptStore

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        journal = self.journal(self.root)
        blobs = self.blobs(self.root)
        return OpenedStore(journal, blobs, (blobs.close, journal.close))


def file_locations(directory: Path, **classes: Any) -> LocationFactory:
    """Fresh directories under ``directory`` opened through the broken classes."""
    numbers = count()

    def fresh() -> StoreLocation:
        root = directory / f"store-{next(numbers)}"
        return StoreLocation(
            name=str(root),
            opener=BrokenFileOpener(str(root), **classes),
            clock=False,
            cleanup=lambda: shutil.rmtree(root, ignore_errors=True),
        )

    return fresh


class _AnyStamp:
    """A stamp equal to every other: the file's stamp is never really compared."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


class _TrustedTails(dict[str, Any]):
    """Cached tails whose stamps match any file: "our own tail is always right"."""

    def get(self, key: str, default: Any = None) -> Any:
        tail = super().get(key, default)
        return None if tail is None else replace(tail, stamp=_AnyStamp())


class TrustsCachedTail(JsonlFileStore):  # type: ignore[misc]  # final; the bug is the point
    """Checks an append's seq against its cached tail without the file's stamp.

    Alone, every append is guarded; once another handle appended to a run this
    handle read, a seq that handle stored goes through again: a duplicate.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tails = _TrustedTails()
