"""A copy, move or import SIGKILLed part way finishes when run again (V6), in real processes.

The killed process is the ``rulvar`` command itself, dying at a failpoint of
its n-th batch write (``_killed_mover``): after the batch committed, or inside
its transaction. Its mover's leases stay behind at both ends until their ttl
(1.5 s here, from the URLs); the re-run waits them out by itself.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rulvar_store import open_store
from rulvar_store.errors import RunMovedError
from rulvar_store.ops import verify_run
from tests.move._places import Place, entry_texts, seed

HERE = Path(__file__).parent
BIG = 9_000  # five batches of 2 000


def _seed_source(place: Place) -> None:
    journal = place.pair.journal
    lease = journal.acquire("big", "seeder")
    for start in range(0, BIG, 1000):
        journal.write_rows(
            "big",
            lease,
            expected_entries=start,
            entries=[
                f'{{"seq":{n + 1},"kind":"x"}}' for n in range(start, start + 1000)
            ],
            meta=None,
            epoch=0,
        )
    journal.put_meta({"runId": "big", "status": "running"}, lease)
    journal.release(lease)
    for run_id in ("small-1", "small-2"):
        seed(place.pair, run_id)


def _rulvar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _killed(batch: int, point: str, *args: str) -> None:
    child = subprocess.run(
        [
            sys.executable,
            str(HERE / "_killed_mover.py"),
            str(batch),
            point,
            "--",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def _short(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "ttl_ms=1500"


@pytest.mark.clause("V6")
@pytest.mark.parametrize(
    ("dst_kind", "point"), [("sqlite", "after-commit"), ("postgres", "before-commit")]
)
def test_a_copy_killed_part_way_finishes_on_the_rerun_V6(
    places: Callable[[str], Place], dst_kind: str, point: str
) -> None:
    """V6: SIGKILL at the second batch, then the same command: every entry exactly once."""
    src, dst = places("sqlite"), places(dst_kind)
    _seed_source(src)
    assert src.url is not None
    assert dst.url is not None
    args = ("runs", "copy", _short(src.url), _short(dst.url), "--all")
    _killed(2, point, *args)
    landed = dst.pair.journal.entry_count("big")
    assert 0 < landed < BIG  # it did die part way
    rerun = _rulvar(*args)
    assert rerun.returncode == 0, rerun.stderr
    for run_id in ("big", "small-1", "small-2"):
        assert verify_run(src.pair, dst.pair, run_id) == []
    assert entry_texts(dst.pair, "big") == entry_texts(src.pair, "big")


@pytest.mark.clause("V6")
@pytest.mark.clause("V4")
def test_a_move_killed_part_way_finishes_and_fences_the_source_V6(
    places: Callable[[str], Place],
) -> None:
    """V6: the re-run of a killed move completes it; V4: then the source refuses."""
    src, dst = places("sqlite"), places("postgres")
    _seed_source(src)
    assert src.url is not None
    assert dst.url is not None
    args = ("runs", "move", _short(src.url), _short(dst.url), "--all")
    _killed(3, "after-commit", *args)
    rerun = _rulvar(*args)
    assert rerun.returncode == 0, rerun.stderr
    for run_id in ("big", "small-1", "small-2"):
        assert verify_run(src.pair, dst.pair, run_id) == []
        with pytest.raises(RunMovedError):
            src.pair.journal.acquire(run_id, "late-worker")
    again = _rulvar(*args)
    assert again.returncode == 0
    assert "already-moved" in again.stdout


@pytest.mark.clause("V6")
@pytest.mark.clause("V9")
def test_an_import_killed_part_way_finishes_on_the_rerun_V6_V9(
    places: Callable[[str], Place], tmp_path: Path
) -> None:
    """V9: the archive goes through the copy's path, so a killed import resumes like a copy."""
    src, dst = places("sqlite"), places("sqlite")
    _seed_source(src)
    assert src.url is not None
    assert dst.url is not None
    archive = tmp_path / "runs.jsonl.gz"
    exported = _rulvar("runs", "export", src.url, str(archive), "--all")
    assert exported.returncode == 0, exported.stderr
    _killed(2, "after-commit", "runs", "import", str(archive), _short(dst.url))
    rerun = _rulvar("runs", "import", str(archive), _short(dst.url))
    assert rerun.returncode == 0, rerun.stderr
    with open_store(dst.url) as fresh:
        for run_id in ("big", "small-1", "small-2"):
            assert verify_run(src.pair, fresh, run_id) == []
