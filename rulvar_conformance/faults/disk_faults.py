"""The disk-faults suite (CONTRACT E1, E2): ``rulvar check URL --suite disk-faults``.

For SQLite an apsw VFS (``DiskFaultVFS``) fails the store's writes, syncs and
truncates with ``SQLITE_FULL`` or ``SQLITE_IOERR``; a read-only database shows
typed errors at once. Each row says which faults ran and what they did.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final
from urllib.parse import quote

from rulvar_conformance.faults._disk_vfs import FAULT_OPS, DiskFaultVFS
from rulvar_conformance.faults._file_layer import FileFaultLayer
from rulvar_conformance.faults._notes import noted_check
from rulvar_conformance.faults._where import scratch_beside
from rulvar_conformance.faults.disk_runs import FaultCase, run_disk_faults
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    not_run,
    require,
)
from rulvar_store import OpenedStore, open_store
from rulvar_store.backend import LocationFactory, file_ops_layer
from rulvar_store.errors import ConfigError, RulvarError

__all__ = ["DISK_CASES", "Wrap", "disk_faults_conformance"]

DISK_CASES: Final = (
    FaultCase("ENOSPC", frozenset({"write"})),
    FaultCase("ENOSPC", frozenset({"sync"})),
    FaultCase("EIO", frozenset({"write"})),
    FaultCase("EIO", frozenset({"sync"})),
    FaultCase("ENOSPC", FAULT_OPS),
    FaultCase("EIO", FAULT_OPS),
)


Wrap = Callable[[OpenedStore], OpenedStore]
"""What the store under test is made of an opened one (a self-test seeds a defect)."""


def _as_is(opened: OpenedStore) -> OpenedStore:
    return opened


def _sqlite_opener(path: Path) -> OpenedStore:
    return open_store("sqlite:///" + quote(str(path)), synchronous="FULL")


def _sqlite_disk_check(locations: LocationFactory, wrap: Wrap) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, "sqlite") as workdir:
                vfs = DiskFaultVFS(f"rulvar-disk-{id(workdir)}", str(workdir))
                try:
                    report = run_disk_faults(
                        lambda: wrap(_sqlite_opener(workdir / "store.db")),
                        vfs,
                        DISK_CASES,
                    )
                finally:
                    vfs.unregister()
        finally:
            location.remove()
        say.append(report.summary())
        require(not report.violations, "; ".join(report.violations))

    return noted_check(
        "disk-faults-sqlite",
        "ENOSPC and EIO on writes, syncs and truncates: typed retryable errors, "
        "nothing lost, the same handle writes on once the disk heals",
        ("E1",),
        body,
    )


@contextmanager
def _read_only(paths: list[Path]) -> Iterator[None]:
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in paths}
    try:
        for path in paths:
            path.chmod(modes[path] & ~0o222)
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def _sqlite_readonly_check(locations: LocationFactory, wrap: Wrap) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, "sqlite") as workdir:
                if os.geteuid() == 0:
                    not_run(
                        "running as root, which writes through read-only "
                        "permissions (the tests remount a tmpfs read-only instead)"
                    )
                path = workdir / "store.db"
                with _sqlite_opener(path) as opened:
                    lease = opened.journal.acquire("ro", "w")  # type: ignore[attr-defined]
                    opened.journal.append("ro", {"seq": 0}, lease)
                    opened.journal.release(lease)  # type: ignore[attr-defined]
                files = [p for p in workdir.iterdir() if p.is_file()]
                with _read_only([*files, workdir]):
                    say.append(_readonly_probe(path, wrap))
        finally:
            location.remove()

    return noted_check(
        "disk-faults-sqlite-readonly",
        "a read-only database file and folder: typed errors at once, nothing changed",
        ("E2",),
        body,
    )


def _readonly_probe(path: Path, wrap: Wrap) -> str:
    """Open and write a read-only store: a typed error, never a raw one or a hang."""
    try:
        with wrap(_sqlite_opener(path)) as opened:
            lease = opened.journal.acquire("ro", "w2")  # type: ignore[attr-defined]
            opened.journal.append("ro", {"seq": 1}, lease)
    except (ConfigError, RulvarError) as exc:
        return f"read-only database: {type(exc).__name__} ({exc.code})"
    except Exception as exc:
        require(False, f"a read-only database raised {type(exc).__name__}: {exc}")
    require(False, "a write to a read-only database succeeded")
    return ""


def _file_disk_check(locations: LocationFactory, wrap: Wrap) -> ConformanceCheck:
    def body(say: list[str]) -> None:
        location = locations()
        try:
            with scratch_beside(location, "file") as workdir:
                layer = FileFaultLayer()
                with file_ops_layer(layer):
                    report = run_disk_faults(
                        lambda: wrap(
                            open_store(f"file://{quote(str(workdir / 'root'))}")
                        ),
                        layer,
                        DISK_CASES,
                    )
        finally:
            location.remove()
        say.append(report.summary())
        require(not report.violations, "; ".join(report.violations))

    return noted_check(
        "disk-faults-file",
        "ENOSPC and EIO on the file store's writes, fsyncs and truncates: typed "
        "retryable errors, nothing lost, the same handle writes on once healed",
        ("E1",),
        body,
    )


def disk_faults_conformance(
    locations: LocationFactory, wrap: Wrap = _as_is
) -> ConformanceSuite:
    """The disk-faults suite (building opens nothing).

    The SQLite rows run for a ``sqlite://`` location and the file-store row for
    a ``file://`` one; each reports the others not run, with the reason.
    """
    return ConformanceSuite(
        "disk-faults",
        (
            _sqlite_disk_check(locations, wrap),
            _sqlite_readonly_check(locations, wrap),
            _file_disk_check(locations, wrap),
        ),
    )
