"""The power-loss models themselves: what a cut keeps, drops and tears (W1, W5).

A model that kept too much would let every store pass; these pin down that an
unsynced change is lost, a synced one kept, a tear lands whole sectors only,
and a file store's new name needs its folder's fsync.
"""

from __future__ import annotations

import contextlib
import os
import random
from pathlib import Path

import apsw
import pytest

from rulvar_conformance.faults._file_power import PowerLossFileOps, write_image
from rulvar_conformance.faults._power_vfs import SECTOR_BYTES, PowerLossVFS, _tear


def _rows(folder: Path, image: dict[str, bytes]) -> list[int]:
    folder.mkdir()
    for name, data in image.items():
        (folder / name).write_bytes(data)
    connection = apsw.Connection(str(folder / "m.db"))
    try:
        return [row[0] for row in connection.execute("SELECT x FROM t ORDER BY x")]
    finally:
        connection.close()


@pytest.mark.clause("W1")
def test_a_cut_keeps_the_synced_commit_and_drops_the_unsynced_one(
    tmp_path: Path,
) -> None:
    live = tmp_path / "live"
    live.mkdir()
    vfs = PowerLossVFS("rulvar-model-test", random.Random(1))
    try:
        vfs.boot(str(live))
        connection = apsw.Connection(str(live / "m.db"))
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("CREATE TABLE t(x)")
        connection.execute("INSERT INTO t VALUES (1)")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("INSERT INTO t VALUES (2)")
        vfs.cut()
        image = vfs.image()
        with contextlib.suppress(apsw.Error):
            connection.close()  # the dead disk refuses the checkpoint
    finally:
        vfs.unregister()
    assert "m.db-shm" not in image
    assert _rows(tmp_path / "after", image) == [1]
    assert vfs.figures.dropped_writes > 0


@pytest.mark.clause("W1")
def test_a_torn_write_lands_whole_sectors_only() -> None:
    old = bytearray(b"o" * (4 * SECTOR_BYTES))
    partial = 0
    for seed in range(20):
        image = bytearray(old)
        _tear(image, (0, b"n" * len(old)), random.Random(seed))
        sectors = {
            bytes(image[i : i + SECTOR_BYTES])
            for i in range(0, len(image), SECTOR_BYTES)
        }
        assert sectors <= {b"o" * SECTOR_BYTES, b"n" * SECTOR_BYTES}
        partial += len(sectors) == 2
    assert partial > 0


@pytest.mark.clause("W5")
def test_a_new_file_survives_only_once_its_folder_is_synced(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    images = []
    for sync_folder in (False, True):
        layer = PowerLossFileOps(random.Random(2))
        layer.boot(root)
        fd = os.open(root / f"f{sync_folder}", os.O_WRONLY | os.O_CREAT, 0o644)
        layer.write(fd, b"line\n")
        layer.fsync(fd)
        os.close(fd)
        if sync_folder:
            folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            layer.fsync(folder)
            os.close(folder)
        layer.cut()
        images.append(layer.image)
    assert "fFalse" not in images[0]
    assert images[1]["fTrue"] == b"line\n"
    out = tmp_path / "out"
    out.mkdir()
    write_image(images[1], out)
    assert (out / "fTrue").read_bytes() == b"line\n"


@pytest.mark.clause("W5")
def test_unsynced_appended_bytes_are_dropped_or_land_as_a_prefix(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "j").write_bytes(b"a\n")
    seen = set()
    for seed in range(10):
        layer = PowerLossFileOps(random.Random(seed))
        layer.boot(root)
        layer.arm(100, tear=True)
        fd = os.open(root / "j", os.O_WRONLY | os.O_APPEND)
        layer.write(fd, b"bbbb\n")
        os.close(fd)
        layer.cut()
        data = layer.image["j"]
        assert data is not None
        assert b"a\nbbbb\n".startswith(data)
        assert data.startswith(b"a\n")
        seen.add(data)
        (root / "j").write_bytes(b"a\n")
    assert len(seen) > 1
