"""A fault layer over the file store's disk changes (``rulvar_store.backend.FileOps``)."""

from __future__ import annotations

import errno
import os

from rulvar_conformance.faults._fault_switch import FaultSwitch
from rulvar_store.backend import FileOps

__all__ = ["FileFaultLayer"]

_ERRNOS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}


class FileFaultLayer(FaultSwitch, FileOps):
    """Fails chosen writes, fsyncs and truncates with ENOSPC or EIO until healed.

    Calls it lets through are the real OS calls (``FileOps``).
    """

    def _check(self, op: str) -> None:
        kind = self.tripped(op)
        if kind is None:
            return
        code = _ERRNOS[kind]
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
