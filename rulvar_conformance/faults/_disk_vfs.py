"""An apsw VFS that fails writes, syncs and truncates on demand (a full or failing disk).

Installed as the process's default VFS while a check runs, it passes every file
through to the VFS that was the default before, and for the files of one folder
it watches, ``fail(kind, ops)`` makes every matching operation fail as the disk
would: ``"ENOSPC"`` as ``SQLITE_FULL``, ``"EIO"`` as ``SQLITE_IOERR``. ``heal()``
gives the space back. Nothing is mocked: the store runs real SQLite on real
files; only the answers of the chosen calls change.
"""

from __future__ import annotations

import os
from typing import Final

import apsw

from rulvar_conformance.faults._fault_switch import FaultSwitch

__all__ = ["FAULT_OPS", "DiskFaultVFS"]

FAULT_OPS: Final = frozenset({"write", "sync", "truncate"})


class _FaultyFile(apsw.VFSFile):
    def __init__(self, vfs: DiskFaultVFS, filename: object, flags: list[int]) -> None:
        super().__init__(vfs.base, filename, flags)  # type: ignore[arg-type]
        self._vfs = vfs

    def xWrite(self, data: bytes, offset: int) -> None:
        self._vfs.check("write")
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        self._vfs.check("sync")
        super().xSync(flags)

    def xTruncate(self, newsize: int) -> None:
        self._vfs.check("truncate")
        super().xTruncate(newsize)


class DiskFaultVFS(FaultSwitch, apsw.VFS):
    """The default VFS while installed; fails chosen operations under ``folder``."""

    def __init__(self, name: str, folder: str) -> None:
        FaultSwitch.__init__(self)
        self._folder = os.path.abspath(folder) + os.sep
        self.base = apsw.vfs_names()[0]
        apsw.VFS.__init__(self, name, self.base, makedefault=True)

    def check(self, op: str) -> None:
        kind = self.tripped(op)
        if kind is None:
            return
        if kind == "ENOSPC":
            raise apsw.FullError(f"{op}: no space left on device (injected)")
        raise apsw.IOError(f"{op}: input/output error (injected)")

    def xOpen(self, name: object, flags: list[int]) -> apsw.VFSFile:
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        if isinstance(path, str) and path.startswith(self._folder):
            return _FaultyFile(self, name, flags)
        return apsw.VFSFile(self.base, name, flags)  # type: ignore[arg-type]
