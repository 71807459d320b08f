"""Simulated power loss of the SQLite store and the file store, and seeded defects.

White-box: the SQLite defects reach into a real SqliteStore (``_conn``) to turn
``synchronous`` off, or wrap it so ``append`` answers before its commit ran; the
file-store defects are disks that forget a folder's or a file's fsync, as a
store that never made them would leave it.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance.faults._file_power import PowerLossFileOps
from rulvar_conformance.faults.file_power import run_file_power_loss
from rulvar_conformance.faults.power_loss import PowerLossPlan, power_loss_conformance
from rulvar_conformance.faults.sqlite_power import (
    Synchronous,
    open_sqlite_at,
    run_power_loss,
)
from rulvar_conformance.harness.kit import ConformanceFailure
from rulvar_store import Clock, OpenedStore
from rulvar_store.backend import LocationFactory

pytest.importorskip("apsw")

# The rows a seeded defect below fails (the self-test meta-test).
SELF_TESTED: frozenset[str] = frozenset({"power-loss-sqlite-full", "power-loss-file"})

CUTS = 20  # per test: a few seconds; the CI run makes 300 per level (.ci/run)


@pytest.mark.clause("W1")
@pytest.mark.clause("W2")
@pytest.mark.clause("W4")
def test_full_keeps_every_acknowledged_write_across_power_cuts(tmp_path: Path) -> None:
    report = run_power_loss(tmp_path, "FULL", CUTS, seed=11)
    assert report.violations == []
    assert report.cuts == CUTS
    assert report.acknowledged > 0
    assert report.lost_acknowledged == 0


@pytest.mark.clause("W1")
@pytest.mark.clause("W3")
@pytest.mark.clause("W4")
def test_normal_keeps_a_prefix_of_each_run_across_power_cuts(tmp_path: Path) -> None:
    report = run_power_loss(tmp_path, "NORMAL", CUTS, seed=12)
    assert report.violations == []
    assert report.cuts == CUTS
    assert report.acknowledged > 0


def _synchronous_off(path: str, synchronous: Synchronous, now: Clock) -> OpenedStore:
    opened = open_sqlite_at(path, synchronous, now)
    opened.journal._conn.execute("PRAGMA synchronous=OFF")  # type: ignore[attr-defined]
    return opened


class _AnswersEarly:
    """A journal whose ``append`` returns at once and commits on a thread later."""

    def __init__(self, journal: Any) -> None:
        self._journal = journal
        self._queue: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while (call := self._queue.get()) is not None:
            try:
                self._journal.append(*call)
            except Exception:
                continue  # nobody is told: that is the defect

    def append(self, run_id: str, entry: Any, lease: Any = None) -> None:
        self._queue.put((run_id, entry, lease))

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def _answers_early(path: str, synchronous: Synchronous, now: Clock) -> OpenedStore:
    opened = open_sqlite_at(path, synchronous, now)
    early = _AnswersEarly(opened.journal)
    return OpenedStore(
        journal=early,
        transcripts=opened.transcripts,
        closers=(early.stop, opened.close),
    )


@pytest.mark.clause("W2")
@pytest.mark.parametrize(
    "opener", [_synchronous_off, _answers_early], ids=["synchronous-off", "ack-early"]
)
def test_the_full_row_fails_a_store_that_acknowledges_before_durable(
    sqlite_locations: LocationFactory, opener: Any
) -> None:
    plan = PowerLossPlan(cuts=CUTS, seed=13, sqlite_opener=opener)
    check = power_loss_conformance(sqlite_locations, plan).check(
        "power-loss-sqlite-full"
    )
    with pytest.raises(ConformanceFailure) as failed:
        check.run()
    assert any(
        words in str(failed.value)
        for words in ("lost at FULL", "cannot be read", "integrity")
    ), failed.value
    assert check.note is not None
    assert "power cuts at FULL" in (check.note() or "")


@pytest.mark.clause("W5")
def test_the_file_store_keeps_acknowledged_appends_and_metas_across_cuts(
    tmp_path: Path,
) -> None:
    report = run_file_power_loss(tmp_path, CUTS, seed=21)
    assert report.violations == []
    assert report.cuts == CUTS
    assert report.acknowledged > 0
    assert report.metas_acknowledged > 0


class _ForgetsFolderSyncs(PowerLossFileOps):
    """A store that never syncs a folder: new runs and renamed metas are volatile."""

    def synced(self, fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            super().synced(fd)


class _ForgetsFileSyncs(PowerLossFileOps):
    """A store that acknowledges an append before its bytes are synced."""

    def synced(self, fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            super().synced(fd)


@pytest.mark.clause("W5")
@pytest.mark.parametrize(
    "layer", [_ForgetsFolderSyncs, _ForgetsFileSyncs], ids=["folder", "file"]
)
def test_the_file_row_fails_a_file_store_that_skips_an_fsync(
    file_locations: LocationFactory, layer: Any
) -> None:
    plan = PowerLossPlan(file_cuts=CUTS, seed=22, file_layer=layer)
    check = power_loss_conformance(file_locations, plan).check("power-loss-file")
    with pytest.raises(ConformanceFailure) as failed:
        check.run()
    assert any(
        words in str(failed.value)
        for words in ("acknowledged appends lost", "cannot be read")
    ), failed.value
