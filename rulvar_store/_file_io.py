"""Layout and durable-write helpers shared by the file-backed stores (T8, T9).

One directory per run holds everything the run owns, so a run moves between
machines by copying its directory::

    <root>/<runId>/journal.jsonl       one JSON entry per line (JsonlFileStore)
    <root>/<runId>/meta.json           the run's meta record (JsonlFileStore)
    <root>/<runId>/run.blob            the blob whose ref is exactly ``<runId>`` (T4)
    <root>/<runId>/blobs/<a>/<b>       the blob ``<runId>/<a>/<b>`` (FileTranscriptStore)

Every name on disk comes from a safe token (``check_safe_token``), so no path
can leave the root. Temporary files carry a ``~``, which no safe token contains,
so they can never be mistaken for a blob or collide with one.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Final

from rulvar_store._failpoints import hit
from rulvar_store._file_ops import file_ops
from rulvar_store._fork import ForkGuard, holding
from rulvar_store._refs import check_safe_token
from rulvar_store._shielded import run_to_completion
from rulvar_store.errors import (
    ConfigError,
    JournalOrderViolation,
    StoreClosedError,
    StoreUnavailableError,
)

__all__ = [
    "BLOBS_DIR",
    "JOURNAL_FILE",
    "META_FILE",
    "NOFOLLOW",
    "RUN_BLOB_FILE",
    "TEMP_MARK",
    "GuardedHandle",
    "creation_modes",
    "ensure_dir",
    "fsync_dir",
    "os_errors",
    "refuse_links",
    "require_folder",
    "resolve_root",
    "run_dir",
    "under_root",
    "write_all",
    "write_atomic",
]

# OS errors no retry can fix: the layout or the filesystem must change first.
# EEXIST reaches here only from a folder the store had to create finding a
# file in its place (the root replaced by a file since the store opened).
_SETUP_ERRNOS: Final = frozenset(
    {
        errno.EROFS,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EEXIST,
    }
)

JOURNAL_FILE: Final = "journal.jsonl"
META_FILE: Final = "meta.json"
RUN_BLOB_FILE: Final = "run.blob"
BLOBS_DIR: Final = "blobs"
# Outside [A-Za-z0-9._-]: a temp name can never equal a stored name.
TEMP_MARK: Final = "~"
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
# What the stores create: owner-only unless the store was opened with
# private=False (then the umask decides, as for any file the user creates).
# Journals, metas and blobs hold prompts and tool outputs.
PRIVATE_FILE: Final = 0o600
PRIVATE_DIR: Final = 0o700
SHARED_FILE: Final = 0o666
SHARED_DIR: Final = 0o777


def creation_modes(private: bool) -> tuple[int, int]:
    """(file mode, directory mode) for new files and folders; the umask still applies."""
    return (PRIVATE_FILE, PRIVATE_DIR) if private else (SHARED_FILE, SHARED_DIR)


# Opening a file through a link fails (ELOOP) instead of following it.
NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC


def resolve_root(root: str | os.PathLike[str]) -> Path:
    """Return the store root as an absolute, normalized path; nothing is created.

    Raises:
        ConfigError: the root, or the nearest part of it that exists, is not a
            directory (every later call would fail the same way).
    """
    path = Path(os.path.abspath(os.fspath(root)))
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        what = "names a file" if existing == path else f"lies under the file {existing}"
        raise ConfigError(f"file store root {path} {what}, not a directory")
    return path


def under_root(root: Path, *segments: str) -> Path:
    """Return ``root/segments...`` after proving it stays under ``root`` (T8).

    Callers pass checked safe tokens, so this never fails in practice; it is the
    last line of defence should a caller forget the check.

    Raises:
        JournalOrderViolation: the joined path would leave the root.
    """
    path = root.joinpath(*segments)
    normalized = os.path.normpath(path)
    if os.path.commonpath([root, normalized]) != str(root) or normalized == str(root):
        raise JournalOrderViolation(f"path {'/'.join(segments)!r} leaves {root}")
    refuse_links(root, Path(normalized))
    return Path(normalized)


def refuse_links(root: Path, path: Path) -> None:
    """Raise unless no existing component of ``path`` below ``root`` is a symlink.

    Safe names keep paths under the root only while nothing under it is a
    link: ``root/evil -> /outside`` would turn ``append("evil")`` into a write
    to ``/outside/journal.jsonl``. The store never creates links, so one
    inside the root was planted; it is refused, never followed (the root
    itself may be a link: that is where the user put the store). Files are
    also opened with ``O_NOFOLLOW`` (``NOFOLLOW``), so a link planted after
    this check fails the open (``ELOOP``, a ``ConfigError`` too).

    Raises:
        ConfigError: a component is a symbolic link.
    """
    try:
        root_mode: int | None = os.stat(root).st_mode  # the root may be a link
    except (FileNotFoundError, NotADirectoryError):
        root_mode = None  # made by the first write
    if root_mode is not None and not stat.S_ISDIR(root_mode):
        raise ConfigError(
            f"file store root {root} is a file, not a directory (fix the store's "
            "directory; retrying cannot help)"
        )
    current = root
    parts = path.relative_to(root).parts
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return  # not there (yet): nothing below it can be a link either
        if stat.S_ISLNK(mode):
            raise ConfigError(
                f"file store {root}: {current} is a symbolic link; the store never "
                "follows links inside its root (remove it)"
            )
        if index == 0 and len(parts) > 1:
            require_folder(current, mode)


def require_folder(path: Path, mode: int | None = None) -> None:
    """Raise if a run's folder exists as something else than a folder.

    A regular file where a run folder belongs is a setup mistake, the same
    ``ConfigError`` for reads and writes (a read used to see no run, a write
    a retryable error that no retry could fix).
    """
    if mode is None:
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
    if not stat.S_ISDIR(mode) and not stat.S_ISLNK(mode):
        raise ConfigError(
            f"file store: {path} is a file where a run's folder belongs (fix the "
            "store's directory; retrying cannot help)"
        )


def run_dir(root: Path, run_id: str) -> Path:
    """Return the directory of ``run_id`` under ``root``.

    Raises:
        JournalOrderViolation: ``run_id`` is not a safe token (T9); nothing touched.
    """
    path = under_root(root, check_safe_token(run_id, "run id"))
    require_folder(path)
    return path


@contextmanager
def os_errors(operation: str, target: Path) -> Iterator[None]:
    """Translate OS errors into the error tree, chaining the original.

    Permission problems, a read-only filesystem, a file where a directory
    belongs (or the reverse) and over-long paths are setup mistakes
    (``ConfigError``, never retryable); anything else (disk full, I/O error, a
    vanished mount) is ``StoreUnavailableError``: retry later, and the outcome of
    the write in flight is unknown.
    """
    try:
        yield
    except PermissionError as exc:
        raise ConfigError(
            f"{operation}: no permission for {target}: {exc.strerror}"
        ) from exc
    except OSError as exc:
        if exc.errno in _SETUP_ERRNOS:
            raise ConfigError(
                f"{operation}: {target}: {exc.strerror or exc} (fix the store's "
                "directory; retrying cannot help)"
            ) from exc
        raise StoreUnavailableError(
            f"{operation}: {target}: {exc.strerror or exc}", operation
        ) from exc


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (created, renamed, removed names) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        file_ops().fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path, mode: int = PRIVATE_DIR) -> bool:
    """Create ``path`` and missing parents durably; return whether anything was made.

    Each new directory's parent is fsynced after the creation, so the new name
    survives a crash before the first file inside it is made durable.

    Raises:
        FileExistsError: a component exists and is not a directory.
    """
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # made by someone else meanwhile: its parent is their job
        fsync_dir(directory.parent)
    return bool(missing)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``; ``os.write`` may write fewer than asked."""
    view = memoryview(data)
    while view:
        written = file_ops().write(fd, view)
        view = view[written:]


def write_atomic(
    path: Path, data: bytes, operation: str = "write", mode: int = PRIVATE_FILE
) -> None:
    """Replace ``path`` with ``data`` so a reader or a crash sees old or new, never half.

    Writes a temp file in the same directory, fsyncs it, renames it over ``path``
    and fsyncs the directory so the rename itself is durable. ``operation``
    names the failpoints between the steps (kill-point tests). The steps run
    whole in a helper thread (``run_to_completion``): an interrupt of the
    caller never leaves the temp file or its descriptor behind.
    """
    run_to_completion(lambda: _write_atomic(path, data, operation, mode))


def _write_atomic(path: Path, data: bytes, operation: str, mode: int) -> None:
    temp = path.with_name(f"{path.name}{TEMP_MARK}{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode)
    try:
        try:
            write_all(fd, data)
            hit(operation, "after-write")
            file_ops().fsync(fd)
        finally:
            os.close(fd)
        hit(operation, "after-fsync")
        file_ops().replace(temp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise
    hit(operation, "after-rename")
    fsync_dir(path.parent)


class GuardedHandle:
    """The lock, closed flag and fork guard of one file-store handle.

    ``_entered`` is every call's way in: a handle used in a forked child refuses
    (``ForkedStoreError``, Y4) BEFORE the lock, since a lock another thread held
    at the fork is never released in the child; then a closed handle refuses.
    """

    _lock: AbstractContextManager[object]
    _closed: bool
    _fork: ForkGuard

    @contextmanager
    def _entered(self, operation: str) -> Iterator[None]:
        with holding(self._fork, self._lock, operation):
            if self._closed:
                raise StoreClosedError(
                    f"{operation} on {self!r}: the store is closed", operation
                )
            yield
