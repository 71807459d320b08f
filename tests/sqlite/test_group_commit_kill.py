"""Group commit under SIGKILL: 8 threads of one process share batches, then it dies (J1, J2, J6, L7).

A child process runs eight writer threads appending to eight runs through ONE
store (group commit on, so they share transactions) and a ninth thread that
keeps appending with a lease that is never live. Each thread writes
``invoke <seq>`` to its own log before a call and ``ok <seq>`` after it returns
(``os.write`` on an unbuffered file: a line is on disk before the next step).
The parent SIGKILLs the child at a random moment mid-stream, opens the file
again and checks, per run:

- the stored seqs are exactly ``0..m`` in order (nothing lost from the middle,
  nothing duplicated: batches commit whole or not at all);
- every acknowledged append is stored (an ``ok`` was only written after the
  shared COMMIT returned);
- at most the one append in flight when the process died is stored without
  its ``ok`` (its batch committed, the reply was lost), and nothing that was
  never invoked is stored;
- no entry of the stale thread is stored anywhere.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rulvar_store_sqlite import SqliteStore

THREADS = 8
ROUNDS = 4

WRITER = textwrap.dedent(
    """
    import os, sys, threading
    from rulvar_store import Lease, LeaseHeldError
    from rulvar_store_sqlite import SqliteStore

    path, logs = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3])
    store = SqliteStore(path, ttl_ms=3_600_000)
    leases = [store.acquire(f"run-{n}", f"w{n}") for n in range(threads)]
    stale = Lease("run-0", "w0", leases[0].epoch + 1000)  # never issued

    def log_to(name):
        fd = os.open(os.path.join(logs, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return lambda line: os.write(fd, (line + "\\n").encode())

    def writer(n):
        log, lease = log_to(f"w{n}.log"), leases[n]
        seq = 0
        while True:
            log(f"invoke {seq}")
            store.append(lease.run_id, {"seq": seq, "by": n, "pad": "x" * 100}, lease)
            log(f"ok {seq}")
            seq += 1

    def stale_writer():
        log = log_to("stale.log")
        seq = 10**6
        while True:
            try:
                store.append("run-0", {"seq": seq, "stale": True}, stale)
                log(f"accepted {seq}")
            except LeaseHeldError:
                pass  # the expected refusal; an acceptance is logged and fails the test
            seq += 1

    for n in range(threads):
        threading.Thread(target=writer, args=(n,), daemon=True).start()
    threading.Thread(target=stale_writer, daemon=True).start()
    print("writing", flush=True)
    threading.Event().wait()
    """
)


def _log(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(kind, int(seq)) for kind, seq in (line.split() for line in lines)]


@pytest.mark.clause("J1")
@pytest.mark.clause("J2")
@pytest.mark.clause("L7")
@pytest.mark.parametrize("seed", range(ROUNDS))
def test_a_killed_process_of_batching_threads_leaves_whole_batches(
    tmp_path: Path, seed: int
) -> None:
    """SIGKILL mid-stream: acknowledged appends stored, the rest at most one per run."""
    path, logs = tmp_path / "kill.db", tmp_path / "logs"
    logs.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(logs), str(THREADS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "writing"
    time.sleep(random.Random(seed).uniform(0.2, 0.8))
    child.send_signal(signal.SIGKILL)
    _, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err
    assert _log(logs / "stale.log") == []
    with SqliteStore(str(path)) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        total = 0
        for n in range(THREADS):
            stored = store.load(f"run-{n}")
            assert not any(entry.get("stale") for entry in stored)
            seqs = [entry["seq"] for entry in stored]
            assert seqs == list(range(len(seqs))), f"run-{n}: {seqs}"
            events = _log(logs / f"w{n}.log")
            acked = {seq for kind, seq in events if kind == "ok"}
            invoked = {seq for kind, seq in events if kind == "invoke"}
            assert acked <= set(seqs), f"run-{n} lost acknowledged appends"
            unacked = set(seqs) - acked
            assert unacked <= invoked - acked, f"run-{n} holds never-invoked seqs"
            assert len(unacked) <= 1, f"run-{n}: {sorted(unacked)} without ok"
            total += len(seqs)
        assert total >= THREADS, "the child died before its threads wrote anything"
