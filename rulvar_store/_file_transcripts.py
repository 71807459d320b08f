"""Blob store over one directory per run; single-writer, never fenced (T1-T5, T8).

The blob ``<runId>/<a>/<b>`` lives at ``<root>/<runId>/blobs/<a>/<b>``; the
slashless ref ``<runId>`` at ``<root>/<runId>/run.blob``, outside ``blobs/``, so
it is storable but never listed (T4). Every segment must be a safe token, so
paths stay under the root. Since segments map to directories, one ref cannot be
both a blob and a prefix of another stored ref (``r/a`` beside ``r/a/b``); such
a put raises ``ContractError`` and changes nothing.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Final, final

from rulvar_store import _intake
from rulvar_store._batch import BlobBatch, blob_batch
from rulvar_store._failpoints import hit
from rulvar_store._file_io import (
    BLOBS_DIR,
    NOFOLLOW,
    RUN_BLOB_FILE,
    GuardedHandle,
    creation_modes,
    ensure_dir,
    fsync_dir,
    os_errors,
    refuse_links,
    resolve_root,
    run_dir,
    under_root,
    write_atomic,
)
from rulvar_store._fork import ForkGuard
from rulvar_store._get_under import get_under_args
from rulvar_store._instrument import instrumented, uncounted
from rulvar_store._jsonl_file import read_all
from rulvar_store._last_ref import last_ref_args, last_ref_of
from rulvar_store._records import BlobInput, Lease
from rulvar_store._refs import check_safe_token, is_safe_token
from rulvar_store._telemetry import Observed, TelemetryTarget
from rulvar_store.errors import ConfigError, ContractError

__all__ = ["FileTranscriptStore"]


def _raise(exc: OSError) -> None:
    raise exc


def _file_target(store: FileTranscriptStore) -> TelemetryTarget:
    return TelemetryTarget("rulvar.file", str(store.root))


@final
@instrumented(_file_target, role="blobs")
class FileTranscriptStore(GuardedHandle, Observed):
    """Opaque blobs as files, written via temp file + fsync + rename; thread-safe.

    Single-writer by contract: it never declares ``fenced_writes``, so
    ``assert_fenced_writes`` refuses it (X5, T8). Lease arguments are accepted
    for SPI compatibility and ignored.

    Args:
        root: the same directory a ``JsonlFileStore`` uses; created on first put.
        private: create blobs owner-only (0600) and folders 0700 (default);
            ``False`` leaves modes to the umask.
    """

    def __init__(self, root: str | os.PathLike[str], *, private: bool = True) -> None:
        if not isinstance(root, str | os.PathLike):
            raise ConfigError(
                f"FileTranscriptStore root must be a path, got {type(root).__name__}"
            )
        if not isinstance(private, bool):
            raise ConfigError(f"private must be a bool, got {type(private).__name__}")
        self._modes = creation_modes(private)
        self.root: Final = resolve_root(root)
        self._lock = threading.Lock()
        self._closed = False
        self._fork = ForkGuard(repr(self))

    def __repr__(self) -> str:
        return f"FileTranscriptStore({str(self.root)!r})"

    def close(self) -> None:
        """Later calls raise ``ContractError``. Idempotent."""
        with self._lock:
            self._closed = True

    def __enter__(self) -> FileTranscriptStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _path(self, ref: object, operation: str) -> Path:
        """Return the file of ``ref``.

        Only the type is checked first: a ref of safe tokens always satisfies
        the shared intake rule (``_intake``), and the stricter file rule refuses
        the rest.

        Raises:
            InvalidArgumentError: ``ref`` is not a string.
            UnsafeNameError: a segment is not a safe token (T8).
        """
        ref = _intake.require_str(ref, operation, "ref")
        segments = ref.split("/")
        shown = ref if len(ref) <= 80 else ref[:80] + "..."
        for segment in segments:
            check_safe_token(
                segment, f"segment of blob ref {shown!r}:", operation, "ref"
            )
        if len(segments) == 1:
            return under_root(self.root, ref, RUN_BLOB_FILE)
        return under_root(self.root, segments[0], BLOBS_DIR, *segments[1:])

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        """Store a copy of ``blob`` under ``ref``, replacing it atomically (T1, D3).

        Raises:
            JournalOrderViolation: unsafe ref; nothing touched.
            ContractError: ``blob`` is not bytes-like, or ``ref`` collides with
                a stored ref that it prefixes or that prefixes it.
        """
        path = self._path(ref, "blob put")
        _intake.lease_or_none(lease, "blob put")
        data = _intake.blob_bytes(blob, "blob put")
        with self._entered("blob put"), os_errors(f"blob put of {ref!r}", path):
            if path.is_dir():
                raise ContractError(
                    f"blob ref {ref!r} is a prefix of other stored refs; a ref "
                    "cannot be both a blob and a folder of blobs"
                )
            try:
                ensure_dir(path.parent, self._modes[1])
            except FileExistsError as exc:
                raise ContractError(
                    f"blob ref {ref!r} extends a ref that is a stored blob; a ref "
                    "cannot be both a blob and a folder of blobs"
                ) from exc
            write_atomic(path, data, "blob_put", self._modes[0])
            hit("blob_put", "after-commit")

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run, in order, each as ``put`` does (T11).

        Single-writer and NOT atomic across the batch: every blob lands
        atomically (temp file, fsync, rename), but a crash between two of them
        leaves the ones before it written. Every argument is checked, and every
        path resolved, before the first blob is written. ``lease`` is only
        type-checked, as by ``put``.

        Raises:
            InvalidArgumentError: the batch breaks a ``_batch`` rule.
            UnsafeNameError: a segment of a ref is not a safe token (T8).
            ContractError: as ``put``; the blobs before the colliding one stay.
        """
        batch = blob_batch(items, lease)
        for ref, _ in batch.items:
            self._path(ref, "blob put_many")
        put = uncounted(FileTranscriptStore, "put")
        for ref, data in batch.items:
            put(self, ref, data)

    def get(self, ref: str) -> bytes | None:
        """Return the blob's bytes, or ``None`` for a missing ref (T2)."""
        path = self._path(ref, "blob get")
        with self._entered("blob get"), os_errors(f"blob get of {ref!r}", path):
            try:
                fd = os.open(path, os.O_RDONLY | NOFOLLOW)
            except (FileNotFoundError, NotADirectoryError):
                return None
            try:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    return None  # a folder of other blobs, not a blob
                return read_all(fd)
            finally:
                os.close(fd)

    def list_refs(self, run_id: str) -> list[str]:
        """Return the refs under ``run_id + "/"``, sorted; never the slashless one (T4).

        Raises:
            JournalOrderViolation: ``run_id`` is not a safe token (``.``, ``..``).
        """
        _intake.require_str(run_id, "blob list_refs", "run_id")
        check_safe_token(run_id, "run id", "blob list_refs")
        blobs = under_root(self.root, run_id, BLOBS_DIR)
        refs: list[str] = []
        with (
            self._entered("blob list_refs"),
            os_errors(f"blob list of run {run_id!r}", blobs),
        ):
            if not blobs.is_dir():
                return []
            for folder, subfolders, files in os.walk(blobs, onerror=_raise):
                for name in (*subfolders, *files):  # one lstat each, no more
                    refuse_links(Path(folder), Path(folder) / name)
                parts = Path(folder).relative_to(blobs).parts
                # Names with characters outside safe tokens are temp files.
                subfolders[:] = [name for name in subfolders if is_safe_token(name)]
                refs.extend(
                    "/".join((run_id, *parts, name))
                    for name in files
                    if is_safe_token(name)
                )
        return sorted(refs)

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12).

        The folder of the run is the index here: its refs are listed (as
        ``list_refs`` does) and the greatest under ``prefix`` kept.

        Raises:
            InvalidArgumentError: a ``_last_ref`` rule is broken.
            JournalOrderViolation: ``run_id`` is not a safe token.
        """
        run_id, prefix = last_ref_args(run_id, prefix)
        return last_ref_of(
            uncounted(FileTranscriptStore, "list_refs")(self, run_id), prefix
        )

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13).

        The run's folder is listed (as ``list_refs`` does) and every blob under
        ``prefix`` read; one removed between the two is left out.

        Raises:
            InvalidArgumentError: a ``_last_ref`` rule is broken.
            JournalOrderViolation: ``run_id`` is not a safe token.
        """
        run_id, prefix = get_under_args(run_id, prefix)
        found: list[tuple[str, bytes]] = []
        # The functions underneath: this call is counted once, not once per read.
        get = uncounted(FileTranscriptStore, "get")
        for ref in uncounted(FileTranscriptStore, "list_refs")(self, run_id):
            if ref.startswith(prefix) and (blob := get(self, ref)) is not None:
                found.append((ref, blob))
        return found

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        """Remove the blob; a missing ref is a no-op (T2). ``lease`` is ignored.

        Folders the removal leaves empty are removed too, so the ref's prefixes
        can become blobs again.
        """
        path = self._path(ref, "blob delete")
        _intake.lease_or_none(lease, "blob delete")
        with self._entered("blob delete"), os_errors(f"blob delete of {ref!r}", path):
            if path.is_dir():
                return  # a folder of other blobs, not a blob
            try:
                os.unlink(path)
            except (FileNotFoundError, NotADirectoryError):
                return
            fsync_dir(path.parent)
            blobs = run_dir(self.root, ref.split("/", 1)[0]) / BLOBS_DIR
            folder = path.parent
            while folder != blobs and blobs in folder.parents:
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                fsync_dir(folder.parent)
                folder = folder.parent
            hit("blob_delete", "after-commit")
