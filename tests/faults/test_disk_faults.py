"""Full disks, I/O errors and read-only filesystems under the SQLite store (E1, E2).

The VFS cases inject ENOSPC and EIO at chosen operations; the tmpfs cases fill
and remount a real small filesystem, so they need root (``mount``): they skip
with the reason elsewhere, and CI (``CI=true``) runs as root.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance.faults._disk_vfs import DiskFaultVFS
from rulvar_conformance.faults._file_layer import FileFaultLayer
from rulvar_conformance.faults.disk_faults import DISK_CASES, disk_faults_conformance
from rulvar_conformance.faults.disk_runs import run_disk_faults
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_store import OpenedStore, open_store
from rulvar_store.backend import file_ops_layer
from rulvar_store.errors import RulvarError, StoreUnavailableError

pytest.importorskip("apsw")

# The rows whose harness a seeded defect below fails (the self-test meta-test).
SELF_TESTED: frozenset[str] = frozenset({"disk-faults-file", "disk-faults-sqlite"})


@pytest.mark.clause("E1")
def test_injected_enospc_and_eio_are_typed_and_the_same_handle_recovers(
    tmp_path: Path,
) -> None:
    vfs = DiskFaultVFS("rulvar-disk-test", str(tmp_path))
    try:
        report = run_disk_faults(
            lambda: open_store(f"sqlite:///{tmp_path / 'd.db'}"), vfs, DISK_CASES
        )
    finally:
        vfs.unregister()
    assert report.violations == []
    assert report.cases == len(DISK_CASES)
    assert report.typed_errors == 3 * len(DISK_CASES)  # append, put_meta, blob put


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs mounted for the test and unmounted after it."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true promises root for the tmpfs tests, but this is not root"
            )
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Write a filler file until the filesystem is full."""
    filler = folder / "filler"
    with open(filler, "wb") as file:
        try:
            while True:
                file.write(b"\0" * 65536)
                file.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise  # only a full disk ends the filling
    return filler


@pytest.mark.clause("E1")
def test_a_really_full_tmpfs_gives_retryable_errors_and_loses_nothing(
    small_tmpfs: Path,
) -> None:
    opened = open_store(f"sqlite:///{small_tmpfs / 'full.db'}")
    journal: object = opened.journal
    lease = journal.acquire("r", "w")  # type: ignore[attr-defined]
    for seq in range(3):
        journal.append("r", {"seq": seq}, lease)  # type: ignore[attr-defined]
    filler = _fill(small_tmpfs)
    refused = 0
    seq = 3
    big = "x" * 200_000
    for _ in range(5):  # the WAL may still have room for a first write or two
        try:
            journal.append("r", {"seq": seq, "pad": big}, lease)  # type: ignore[attr-defined]
            seq += 1
        except StoreUnavailableError as exc:
            refused += int(exc.retryable)
    assert refused > 0, "the full disk never refused a write (retryable)"
    filler.unlink()
    journal.append("r", {"seq": seq}, lease)  # type: ignore[attr-defined]
    seqs = [e["seq"] for e in journal.load("r")]  # type: ignore[attr-defined]
    assert seqs == list(range(seq + 1))
    opened.close()
    with open_store(f"sqlite:///{small_tmpfs / 'full.db'}") as again:
        assert [e["seq"] for e in again.journal.load("r")] == list(range(seq + 1))


def _write_once(path: Path) -> None:
    with open_store(f"sqlite:///{path}") as opened:
        lease = opened.journal.acquire("r", "w2")  # type: ignore[attr-defined]
        opened.journal.append("r", {"seq": 1}, lease)


@pytest.mark.clause("E2")
def test_a_read_only_filesystem_gives_typed_errors_without_a_hang(
    small_tmpfs: Path,
) -> None:
    path = small_tmpfs / "ro.db"
    with open_store(f"sqlite:///{path}") as opened:
        lease = opened.journal.acquire("r", "w")  # type: ignore[attr-defined]
        opened.journal.append("r", {"seq": 0}, lease)
        opened.journal.release(lease)  # type: ignore[attr-defined]
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    try:
        with pytest.raises(RulvarError):
            _write_once(path)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_tmpfs)], check=True)
    with open_store(f"sqlite:///{path}") as opened:
        assert [e["seq"] for e in opened.journal.load("r")] == [0]


@pytest.mark.clause("E1")
def test_the_file_store_behind_a_fault_layer_is_typed_and_recovers(
    tmp_path: Path,
) -> None:
    layer = FileFaultLayer()
    with file_ops_layer(layer):
        report = run_disk_faults(
            lambda: open_store(f"file://{tmp_path / 'root'}"), layer, DISK_CASES
        )
    assert report.violations == []
    assert report.typed_errors == 3 * len(DISK_CASES)
    assert layer.failed >= len(DISK_CASES)


class _RawErrors:
    """A broken journal: a full disk reaches its caller as a raw OSError."""

    def __init__(self, journal: Any) -> None:
        self._journal = journal

    def append(self, *args: Any) -> None:
        try:
            self._journal.append(*args)
        except StoreUnavailableError as exc:
            raise OSError(28, "No space left on device") from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def _leaks_raw_errors(opened: OpenedStore) -> OpenedStore:
    return OpenedStore(
        journal=_RawErrors(opened.journal),
        transcripts=opened.transcripts,
        closers=(opened.close,),
    )


@pytest.mark.clause("E1")
@pytest.mark.parametrize("scheme", ["sqlite", "file"])
def test_the_disk_rows_fail_a_store_that_leaks_a_raw_os_error(
    request: pytest.FixtureRequest, scheme: str
) -> None:
    locations = request.getfixturevalue(f"{scheme}_locations")
    suite = disk_faults_conformance(locations, _leaks_raw_errors)
    with pytest.raises(ConformanceFailure, match="append raised OSError"):
        suite.check(f"disk-faults-{scheme}").run()


@pytest.mark.clause("E2")
def test_a_read_only_filesystem_under_the_file_store_gives_typed_errors(
    small_tmpfs: Path,
) -> None:
    url = f"file://{small_tmpfs / 'root'}"
    with open_store(url) as opened:
        opened.journal.append("r", {"seq": 0})
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    try:
        with open_store(url) as opened:
            with pytest.raises(RulvarError):
                opened.journal.append("r", {"seq": 1})
            with pytest.raises(RulvarError):
                opened.journal.put_meta({"runId": "r", "status": "done"})
            with pytest.raises(RulvarError):
                opened.transcripts.put("r/blob", b"x")
            assert [e["seq"] for e in opened.journal.load("r")] == [0]
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_tmpfs)], check=True)
