"""Runtime contention between real processes (Q5): bounded waits, typed busy errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import apsw
import pytest

from rulvar_store import StoreBusyError
from rulvar_store_sqlite import SqliteStore

RAW_HOLDER = textwrap.dedent(
    """
    import sys, apsw
    conn = apsw.Connection(sys.argv[1])
    conn.execute("BEGIN IMMEDIATE")
    print("holding", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()
    """
)

STORE_HOLDER = textwrap.dedent(
    """
    import sys
    from rulvar_store import set_failpoint_hook
    from rulvar_store_sqlite import SqliteStore

    def pause(operation, point):
        if operation == "append" and point == "after-fence-check":
            print("holding", flush=True)
            sys.stdin.readline()

    store = SqliteStore(sys.argv[1])
    lease = store.acquire("held-run", "holder")
    set_failpoint_hook(pause)
    store.append("held-run", {"seq": 0, "by": "holder"}, lease)
    store.close()
    """
)


@contextmanager
def holder(script: str, path: str) -> Iterator[subprocess.Popen[str]]:
    """A child process inside BEGIN IMMEDIATE on ``path`` until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", script, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stderr is not None
        try:
            line = child.stdout.readline()
            assert line.strip() == "holding", child.stderr.read()
            yield child
        finally:
            if child.poll() is None:
                child.stdin.write("go\n")
                child.stdin.flush()
            child.wait(timeout=30)
        assert child.returncode == 0, child.stderr.read()


@pytest.mark.clause("Q5")
@pytest.mark.parametrize("busy_timeout_ms", [0, 150])
def test_write_lock_held_by_another_process_raises_typed_busy(
    db_path: str, busy_timeout_ms: int
) -> None:
    """Past busy_timeout_ms (0 = fail fast) a write raises StoreBusyError, writes nothing."""
    with SqliteStore(db_path, busy_timeout_ms=busy_timeout_ms) as store:
        with holder(RAW_HOLDER, db_path):
            with pytest.raises(StoreBusyError) as raised:
                store.append("run", {"seq": 0})
            assert raised.value.retryable is True
            assert isinstance(raised.value.__cause__, apsw.BusyError)
            with pytest.raises(StoreBusyError):
                store.acquire("run", "A")
            assert store.load("run") == []  # WAL readers are never blocked
            assert not store._conn.in_transaction
        store.append("run", {"seq": 0})
        assert store.load("run") == [{"seq": 0}]


@pytest.mark.clause("Q5")
def test_store_paused_inside_its_transaction_blocks_writers_of_other_processes(
    db_path: str,
) -> None:
    """A store process paused after its fence check holds the file; ours times out typed."""
    with SqliteStore(db_path, busy_timeout_ms=100) as store:
        with holder(STORE_HOLDER, db_path):
            with pytest.raises(StoreBusyError):
                store.append("mine", {"seq": 0})
            with pytest.raises(StoreBusyError):
                store.transcripts().put("mine/b", b"x")
        store.append("mine", {"seq": 0})
        assert store.load("held-run") == [{"seq": 0, "by": "holder"}]
        assert store.load("mine") == [{"seq": 0}]
        assert store.transcripts().get("mine/b") is None


SLOW_HOLDER = textwrap.dedent(
    """
    import sys, time, apsw
    conn = apsw.Connection(sys.argv[1])
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO entries (run_id, payload) VALUES ('run', '{\\"seq\\":0}')")
    print("holding", flush=True)
    time.sleep(0.3)
    conn.execute("COMMIT")
    conn.close()
    """
)


@pytest.mark.clause("Q5")
def test_waiting_writer_gets_through_once_the_holder_commits(db_path: str) -> None:
    """Within busy_timeout_ms a writer queues behind the holder instead of failing."""
    with SqliteStore(db_path, busy_timeout_ms=30_000) as store:
        with subprocess.Popen(
            [sys.executable, "-c", SLOW_HOLDER, db_path],
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "holding"
            store.append("run", {"seq": 1})  # waits for the holder's COMMIT
            assert child.wait(timeout=30) == 0
        assert store.load("run") == [{"seq": 0}, {"seq": 1}]
