"""JsonlFileStore across real OS processes on one host: flock keeps J6 atomic."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rulvar_store import JsonlFileStore

# Each child races the others for the next seq: load the tail, append tail + 1.
_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from rulvar_store import JsonlFileStore
    from rulvar_store.errors import JournalOrderViolation

    root, rounds = sys.argv[1], int(sys.argv[2])
    store = JsonlFileStore(root)
    won = lost = 0
    for i in range(rounds):
        entries = store.load("shared")
        seq = max((e["seq"] for e in entries), default=-1) + 1
        try:
            store.append("shared", {"seq": seq, "pid": os.getpid(), "i": i})
            won += 1
        except JournalOrderViolation:
            lost += 1
    print(json.dumps({"won": won, "lost": lost}))
    """
)

PROCESSES = 4
ROUNDS = 40


@pytest.mark.clause("J6")
def test_processes_racing_for_the_next_seq_never_both_persist(tmp_path: Path) -> None:
    """Every persisted seq is unique and increasing; wins equal persisted lines."""
    root = tmp_path / "root"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root), str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        reports.append(json.loads(out))
    entries = JsonlFileStore(root).load("shared")
    seqs = [entry["seq"] for entry in entries]
    assert seqs == list(range(len(seqs)))
    assert sum(report["won"] for report in reports) == len(entries)
    assert all(report["won"] + report["lost"] == ROUNDS for report in reports)
    lines = (root / "shared" / "journal.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) - 1 == len(entries)
