"""Power loss under the file store: a ``FileOps`` layer that knows what is durable.

The file store changes the disk through ``rulvar_store.backend.FileOps``; this
layer passes every call to the OS and keeps, beside the real files, the model
of what a power cut would leave:

- a file's durable bytes are its content at its last ``fsync`` (a file whose
  directory entry is durable but whose data never was synced is empty);
- a directory's durable entries are its listing at its last ``fsync`` (so a
  run folder, a journal file or a renamed ``meta.json`` survives only once its
  parent directory was synced after the change); the store's root is durable
  as it was at boot.

``cut()`` freezes the image: every durable directory with its durable entries,
each file with its durable bytes and, with ``tear``, a random prefix of the
bytes written after its last sync (a torn last journal line). Every later call
fails with EIO, as a dead disk would.
"""

from __future__ import annotations

import errno
import os
import random
import stat
from pathlib import Path

from rulvar_conformance.faults._power_switch import PowerSwitch
from rulvar_store.backend import FileOps

__all__ = ["FileImage", "PowerLossFileOps", "write_image"]

# (device, inode, generation): the kernel reuses a freed inode number at once,
# so a file replaced away and a new temp file can share one; the generation,
# bumped when ``replace`` frees the target's inode, keeps them apart.
_Key = tuple[int, int, int]
_Entries = dict[str, tuple[_Key, bool]]  # name -> (inode, is a directory)
FileImage = dict[str, bytes | None]
"""What the disk holds after a cut: relative path -> bytes (``None``: a folder)."""


def _read_fd(fd: int) -> bytes:
    # Through /proc: the store may hold the file write-only (a temp file).
    with open(f"/proc/self/fd/{fd}", "rb") as file:
        return file.read()


class PowerLossFileOps(PowerSwitch, FileOps):
    """The OS calls, plus a model of the durable disk; ``cut()`` ends the machine."""

    def __init__(self, rng: random.Random) -> None:
        PowerSwitch.__init__(self)
        self._rng = rng
        self._root = Path()
        self._root_key: _Key = (0, 0, 0)
        self._files: dict[_Key, bytes] = {}
        self._dirs: dict[_Key, _Entries] = {}
        self._generations: dict[tuple[int, int], int] = {}
        self.image: FileImage = {}
        self.torn_files = 0
        self.dropped_bytes = 0

    def boot(self, root: Path) -> None:
        """Everything under ``root`` now is durable (a fresh boot from an image)."""
        with self.lock:
            self._root = root
            self._files, self._dirs, self._generations = {}, {}, {}
            self._root_key = self._key(os.lstat(root))
            for folder, _, names in os.walk(root):
                self._dirs[self._key(os.lstat(folder))] = self._listing(folder)
                for name in names:
                    path = os.path.join(folder, name)
                    with open(path, "rb") as file:
                        self._files[self._key(os.lstat(path))] = file.read()
            self._restore_power()
            self.image = {}
            self.torn_files = self.dropped_bytes = 0

    def _key(self, st: os.stat_result) -> _Key:
        inode = (st.st_dev, st.st_ino)
        return (*inode, self._generations.get(inode, 0))

    def _listing(self, path: str) -> _Entries:
        entries: _Entries = {}
        with os.scandir(path) as scan:
            for entry in scan:
                st = entry.stat(follow_symlinks=False)
                entries[entry.name] = (self._key(st), stat.S_ISDIR(st.st_mode))
        return entries

    def _tick(self) -> None:
        if self.dead:
            raise OSError(errno.EIO, "power is off")
        if self._cut_at_this_change():
            raise OSError(errno.EIO, "power cut")

    # -- FileOps ---------------------------------------------------------------

    def write(self, fd: int, data: memoryview | bytes) -> int:
        with self.lock:
            self._tick()
            return super().write(fd, data)

    def ftruncate(self, fd: int, size: int) -> None:
        with self.lock:
            self._tick()
            super().ftruncate(fd, size)

    def replace(
        self, source: os.PathLike[str] | str, target: os.PathLike[str] | str
    ) -> None:
        with self.lock:
            self._tick()
            try:
                replaced = os.lstat(target)
            except FileNotFoundError:
                replaced = None
            super().replace(source, target)
            if replaced is not None and replaced.st_nlink <= 1:
                inode = (replaced.st_dev, replaced.st_ino)
                self._generations[inode] = self._generations.get(inode, 0) + 1

    def fsync(self, fd: int) -> None:
        with self.lock:
            self._tick()
            super().fsync(fd)
            self.synced(fd)

    def synced(self, fd: int) -> None:
        """Record what ``fd``'s sync made durable (a subclass may forget some)."""
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self._dirs[self._key(st)] = self._listing(
                os.readlink(f"/proc/self/fd/{fd}")
            )
        else:
            self._files[self._key(st)] = _read_fd(fd)

    # -- the cut ---------------------------------------------------------------

    def _freeze(self) -> None:
        live: dict[_Key, str] = {}
        for folder, _, names in os.walk(self._root):
            for name in names:
                path = os.path.join(folder, name)
                live[self._key(os.lstat(path))] = path
        self.image = {}
        self._visit(self._root_key, "", live)

    def _visit(self, folder: _Key, prefix: str, live: dict[_Key, str]) -> None:
        for name, (key, is_dir) in sorted(self._dirs.get(folder, {}).items()):
            relative = f"{prefix}{name}"
            if is_dir:
                self.image[relative] = None
                self._visit(key, relative + "/", live)
            else:
                self.image[relative] = self._file(key, live.get(key))

    def _file(self, key: _Key, live_path: str | None) -> bytes:
        durable = self._files.get(key, b"")
        if live_path is None:
            return durable
        with open(live_path, "rb") as file:
            now = file.read()
        extra = len(now) - len(durable)
        if extra <= 0 or not now.startswith(durable):
            return durable
        landed = self._rng.randint(0, extra) if self._tear else 0
        if 0 < landed < extra:
            self.torn_files += 1
        self.dropped_bytes += extra - landed
        return now[: len(durable) + landed]


def write_image(image: FileImage, root: Path) -> None:
    """Lay the image out under ``root`` (which exists and is empty)."""
    for relative, data in sorted(image.items()):
        path = root / relative
        if data is None:
            path.mkdir()
        else:
            path.write_bytes(data)
