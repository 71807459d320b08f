"""A fault layer over the file store's disk changes (``rulvar_store.backend.FileOps``)."""

from __future__ import annotations

import errno
import os
import threading

from rulvar_conformance.faults.disk_runs import DiskFault
from rulvar_store.backend import FileOps

__all__ = ["FileFaultLayer"]

_ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


class FileFaultLayer(FileOps):
    """Fails chosen writes, fsyncs and truncates with ENOSPC or EIO until healed.

    Calls it lets through are the real OS calls (``FileOps``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: DiskFault | None = None
        self._ops: frozenset[str] = frozenset()
        self.failed = 0

    def fail(self, kind: DiskFault, ops: frozenset[str]) -> None:
        with self._lock:
            self._kind, self._ops = kind, ops

    def heal(self) -> None:
        with self._lock:
            self._kind, self._ops = None, frozenset()

    def _check(self, op: str) -> None:
        with self._lock:
            if self._kind is None or op not in self._ops:
                return
            self.failed += 1
            code = _ERRNOS[self._kind]
        raise OSError(code, f"{os.strerror(code)} (injected on {op})")

    def write(self, fd: int, data: memoryview | bytes) -> int:
        self._check("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._check("sync")
        super().fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._check("truncate")
        super().ftruncate(fd, size)
