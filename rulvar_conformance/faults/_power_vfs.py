"""An apsw VFS that keeps unsynced writes volatile and can cut the power.

SQLite proves its own crash safety with a VFS that simulates power loss; this is
the kit's Python twin for the SQLite store. Installed as the process's default
VFS (so ``SqliteStore`` needs no option to use it), it passes every file through
to the real one and, for the files of one folder it watches, keeps a model of
what a disk would hold after a power cut:

- the *durable image* of a file is its bytes as of its last ``xSync`` (a file
  never synced since it was created has no durable image: its name is lost too);
- every ``xWrite`` and ``xTruncate`` since then is *volatile*, kept in order.

``cut()`` ends the machine: the durable images are frozen, and, with ``tear``,
a random prefix of the volatile writes lands too, the last of them torn at
sector granularity (some 512-byte pieces written, others not). From then on
every file operation in the folder fails with an I/O error, as a dead disk
would, so the store's callers stop with typed errors.

The ``-shm`` index is memory-mapped by SQLite through ``xShmMap``, which apsw
passes to the inherited file untouched: it never reaches the disk image, and a
reopened database rebuilds it from the WAL, as after a real power cut. WAL
durability is decided by the syncs of the ``-wal`` file, which this layer sees.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import apsw

from rulvar_conformance.faults._power_switch import PowerSwitch

__all__ = ["SECTOR_BYTES", "CutFigures", "PowerLossVFS"]

SECTOR_BYTES: Final = 512
"""The granularity of a torn write: a disk writes whole sectors or none of one."""

# (offset, data) for a write, (size, None) for a truncate.
_Op = tuple[int, bytes | None]


@dataclass
class _Track:
    """One watched file: its durable bytes and the operations not yet synced."""

    durable: bytearray | None
    volatile: list[_Op] = field(default_factory=list)


@dataclass
class CutFigures:
    """What one power cut did to the writes that were not synced yet."""

    dropped_writes: int = 0
    landed_writes: int = 0
    torn_writes: int = 0


def _apply(image: bytearray, op: _Op) -> None:
    offset, data = op
    if data is None:
        del image[offset:]
        return
    if len(image) < offset:
        image.extend(bytes(offset - len(image)))
    image[offset : offset + len(data)] = data


def _tear(image: bytearray, op: _Op, rng: random.Random) -> None:
    """Land a random subset of the write's sectors (a truncate lands or not)."""
    offset, data = op
    if data is None:
        if rng.random() < 0.5:
            _apply(image, op)
        return
    start = offset
    end = offset + len(data)
    while start < end:
        piece_end = min(end, (start // SECTOR_BYTES + 1) * SECTOR_BYTES)
        if rng.random() < 0.5:
            _apply(image, (start, data[start - offset : piece_end - offset]))
        start = piece_end


class _PowerFile(apsw.VFSFile):
    """A file of the base VFS whose changes the power model records."""

    def __init__(
        self, vfs: PowerLossVFS, name: str, filename: object, flags: list[int]
    ):
        super().__init__(vfs.base, filename, flags)  # type: ignore[arg-type]
        self._vfs = vfs
        self._name = name

    def xWrite(self, data: bytes, offset: int) -> None:
        with self._vfs.lock:
            self._vfs.mutate(self._name)
            super().xWrite(data, offset)
            self._vfs.record(self._name, (offset, bytes(data)))

    def xTruncate(self, newsize: int) -> None:
        with self._vfs.lock:
            self._vfs.mutate(self._name)
            super().xTruncate(newsize)
            self._vfs.record(self._name, (newsize, None))

    def xSync(self, flags: int) -> None:
        with self._vfs.lock:
            self._vfs.mutate(self._name)
            super().xSync(flags)
            self._vfs.synced(self._name)

    def xRead(self, amount: int, offset: int) -> bytes:
        self._vfs.alive()
        return super().xRead(amount, offset)


class PowerLossVFS(PowerSwitch, apsw.VFS):
    """The default VFS while installed; models power loss for files under ``folder``.

    ``arm(after)`` cuts the power at the ``after``-th write, truncate or sync of a
    watched file (that operation never happens); ``cut()`` cuts it now. ``image()``
    returns what the disk holds after the cut, by file name.
    """

    def __init__(self, name: str, rng: random.Random) -> None:
        PowerSwitch.__init__(self)
        self._rng = rng
        self._folder = ""
        self._tracks: dict[str, _Track] = {}
        self._on_cut: Callable[[], None] | None = None
        self.figures = CutFigures()
        self._image: dict[str, bytes] = {}
        # The default VFS before this one: files are that VFS's files underneath.
        self.base = apsw.vfs_names()[0]
        apsw.VFS.__init__(self, name, self.base, makedefault=True)

    # -- the machine's life cycle --------------------------------------------

    def boot(self, folder: str) -> None:
        """Watch ``folder``; what its files hold now is durable (a fresh boot)."""
        with self.lock:
            self._folder = os.path.abspath(folder) + os.sep
            self._tracks = {}
            for entry in os.scandir(folder):
                # Every file on the disk at boot is durable, opened later or not;
                # the -shm index is SQLite's memory, never part of the image.
                if entry.is_file() and not entry.name.endswith("-shm"):
                    path = self._folder + entry.name
                    self._tracks[path] = _Track(bytearray(_read(path) or b""))
            self._restore_power()
            self.figures = CutFigures()
            self._image = {}

    def arm(
        self, after: int, *, tear: bool, on_cut: Callable[[], None] | None = None
    ) -> None:
        """Cut the power at the ``after``-th change; ``on_cut`` runs at the cut."""
        with self.lock:
            super().arm(after, tear=tear)
            self._on_cut = on_cut

    def _freeze(self) -> None:
        for path, track in self._tracks.items():
            image = self._survivor(track)
            if image is not None:
                self._image[os.path.basename(path)] = bytes(image)
        if self._on_cut is not None:
            self._on_cut()

    def image(self) -> dict[str, bytes]:
        """The disk after the cut: file name -> bytes (unsynced new files absent)."""
        with self.lock:
            if not self.dead:
                raise RuntimeError("image() before the power was cut")
            return dict(self._image)

    def _survivor(self, track: _Track) -> bytearray | None:
        image = None if track.durable is None else bytearray(track.durable)
        ops = track.volatile
        landed = self._rng.randint(0, len(ops)) if self._tear and ops else 0
        torn = min(len(ops) - landed, self._rng.randint(0, 2)) if self._tear else 0
        if image is None:
            # A file never synced: its directory entry is not durable either.
            self.figures.dropped_writes += len(ops)
            return None
        for op in ops[:landed]:
            _apply(image, op)
        for op in ops[landed : landed + torn]:
            _tear(image, op, self._rng)
        self.figures.landed_writes += landed
        self.figures.torn_writes += torn
        self.figures.dropped_writes += len(ops) - landed - torn
        return image

    # -- called by the files, under ``lock`` ------------------------------------

    def watched(self, path: str) -> bool:
        return bool(self._folder) and path.startswith(self._folder)

    def alive(self) -> None:
        if self.dead:
            raise apsw.IOError("power is off")

    def mutate(self, path: str) -> None:
        """One change is about to happen: cut here if the countdown ends."""
        self.alive()
        if path in self._tracks and self._cut_at_this_change():
            raise apsw.IOError("power cut")

    def record(self, path: str, op: _Op) -> None:
        track = self._tracks.get(path)
        if track is not None:
            track.volatile.append(op)

    def synced(self, path: str) -> None:
        track = self._tracks.get(path)
        if track is None:
            return
        image = track.durable if track.durable is not None else bytearray()
        for op in track.volatile:
            _apply(image, op)
        track.durable = image
        track.volatile = []

    # -- VFS -----------------------------------------------------------------

    def xOpen(self, name: object, flags: list[int]) -> apsw.VFSFile:
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        if not isinstance(path, str):  # a temp file SQLite names itself
            return apsw.VFSFile(self.base, name, flags)  # type: ignore[arg-type]
        with self.lock:
            if not self.watched(path):
                return apsw.VFSFile(self.base, name, flags)  # type: ignore[arg-type]
            self.alive()
            if path not in self._tracks:
                existing = _read(path)
                self._tracks[path] = _Track(
                    None if existing is None else bytearray(existing)
                )
            return _PowerFile(self, path, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        with self.lock:
            if self.watched(filename):
                self.alive()
                self._tracks.pop(filename, None)
            super().xDelete(filename, syncdir)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        return None
