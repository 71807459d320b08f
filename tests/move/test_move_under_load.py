"""A move under load, in real processes (V10): writers keep going, a paused zombie is fenced.

Two writer processes append to their own runs of the source SQLite file the
whole time; a third process holds the moved run's lease (ttl 1 s) and is
SIGSTOPped while ``rulvar runs move --wait`` moves that run to PostgreSQL. Once
continued, every write it tries, at the source and at the destination, is
refused, and nothing of it appears anywhere.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.move._places import Place, entry_texts, seed

WORKER = str(Path(__file__).parent / "_load_worker.py")


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.clause("V10")
@pytest.mark.clause("V4")
def test_writers_keep_working_and_a_paused_zombie_is_fenced_at_both_ends_V10(
    places: Callable[[str], Place], tmp_path: Path
) -> None:
    """V10: other runs' writers are untouched by the move; the zombie writes nowhere."""
    src, dst = places("sqlite"), places("postgres")
    assert src.url is not None
    assert dst.url is not None
    short = src.url + "?ttl_ms=1000"
    seed(src.pair, "victim")
    stop = tmp_path / "stop"
    writers = [_spawn("writer", short, f"busy-{n}", str(stop)) for n in range(2)]
    zombie = _spawn("zombie", short, dst.url, "victim")
    try:
        assert zombie.stdout is not None
        assert zombie.stderr is not None
        ready = zombie.stdout.readline().strip()
        assert ready == "ready", zombie.stderr.read()
        os.kill(zombie.pid, signal.SIGSTOP)
        time.sleep(0.3)
        before = {
            f"busy-{n}": len(src.pair.journal.load(f"busy-{n}")) for n in range(2)
        }
        moved = subprocess.run(
            [
                sys.executable,
                "-m",
                "rulvar_cli",
                "runs",
                "move",
                short,
                dst.url,
                "--run",
                "victim",
                "--wait",
                "--wait-timeout",
                "30",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert moved.returncode == 0, moved.stderr
        assert json.loads(moved.stdout)["runs"][0]["action"] == "moved"
        time.sleep(0.3)
        during = {
            f"busy-{n}": len(src.pair.journal.load(f"busy-{n}")) for n in range(2)
        }
        moved_entries = entry_texts(dst.pair, "victim")
        os.kill(zombie.pid, signal.SIGCONT)
        out, err = zombie.communicate("go\n", timeout=60)
        assert zombie.returncode == 0, err
        results = json.loads(out.strip().splitlines()[-1])
    finally:
        stop.touch()
        os.kill(zombie.pid, signal.SIGCONT) if zombie.poll() is None else None
        reports = [json.loads(w.communicate(timeout=60)[0]) for w in writers]
    assert all(during[run] > before[run] for run in before), (before, during)
    for report in reports:
        assert report["errors"] == []
        assert report["accepted"] > 0
    destination = dst.url.split("://", 1)[1]
    assert results["source_append"] == "LeaseHeldError:"
    assert results["source_meta"] == "LeaseHeldError:"
    assert results["source_renew"] == "LeaseHeldError:"
    assert results["source_acquire"].startswith("RunMovedError:")
    assert destination.split("?")[0] in results["source_acquire"]
    assert results["destination_append"] == "LeaseHeldError:"
    assert results["destination_blob"] == "LeaseHeldError:"
    assert results["destination_renew"] == "LeaseHeldError:"
    assert (
        entry_texts(dst.pair, "victim") == moved_entries
    )  # nothing of the zombie after
    assert dst.pair.transcripts.get("victim/z") is None
    assert any(
        '"zombie-before"' in text for text in moved_entries
    )  # its earlier write moved
