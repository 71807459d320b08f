"""The file stores' calls that change the disk, in one place a fault layer can sit over.

``JsonlFileStore`` and ``FileTranscriptStore`` write, fsync, truncate and
rename through ``file_ops()``. Normally that is ``FileOps``, the plain OS
calls. ``file_ops_layer(layer)`` puts another ``FileOps`` (a subclass that
fails chosen calls with ENOSPC or EIO, as the conformance kit's disk-faults
suite does) in front for the duration of a ``with`` block, process-wide. The
layer still calls the OS for the calls it lets through: it changes answers,
never the filesystem's behaviour.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FileOps", "file_ops", "file_ops_layer"]


class FileOps:
    """The OS calls the file stores make to change the disk."""

    def write(self, fd: int, data: memoryview | bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def replace(
        self, source: os.PathLike[str] | str, target: os.PathLike[str] | str
    ) -> None:
        os.replace(source, target)


_PLAIN = FileOps()
_lock = threading.Lock()
_current: FileOps = _PLAIN


def file_ops() -> FileOps:
    """The layer in force (the plain OS calls unless a fault layer is installed)."""
    return _current


@contextmanager
def file_ops_layer(layer: FileOps) -> Iterator[FileOps]:
    """Route the file stores' disk changes through ``layer`` inside the block."""
    global _current
    with _lock:
        previous, _current = _current, layer
    try:
        yield layer
    finally:
        with _lock:
            _current = previous
