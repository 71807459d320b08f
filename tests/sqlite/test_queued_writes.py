"""Queued SQLite writes: a write nobody waits on shares the next write's COMMIT (Q19).

``queue_put`` lingers for company; the first write submitted meanwhile takes
the lead over and carries it, so both land in ONE transaction. Without company
it commits alone once its linger is over; ``flush_queued`` (a reader's) lands
it at once. Real threads, a real file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_store import Lease, LeaseHeldError
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._transaction import Operation

LONG_LINGER_S = 30.0  # longer than any test: only company or a flush ends it


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "queued.db"), ttl_ms=600_000) as opened:
        yield opened


def _batches(store: SqliteStore) -> int:
    return store._door.batches  # the door's own count


def test_a_queued_put_shares_the_commit_of_the_next_write(store: SqliteStore) -> None:
    """Q19: one transaction for the queued put and the put that arrives meanwhile."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    before = _batches(store)
    queued = blobs.queue_put("r1/w/a", b"task writes", lease, linger_s=LONG_LINGER_S)
    assert (
        blobs.get("r1/w/a") is None
    )  # queued, not written: await_put has not returned
    blobs.put("r1/c/1", b"checkpoint", lease)
    started = time.monotonic()
    assert blobs.await_put(queued) is True  # a write came to share its COMMIT
    assert time.monotonic() - started < LONG_LINGER_S / 2
    assert _batches(store) == before + 1
    assert blobs.get("r1/w/a") == b"task writes"
    assert blobs.get("r1/c/1") == b"checkpoint"


def test_a_queued_put_keeps_its_order_against_later_writes(store: SqliteStore) -> None:
    """Q19: queued first, applied first: the later put of the same ref wins."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    first = blobs.queue_put("r1/x", b"first", lease, linger_s=LONG_LINGER_S)
    second = blobs.queue_put("r1/x", b"second", lease, linger_s=LONG_LINGER_S)
    blobs.put("r1/y", b"company", lease)
    assert blobs.await_put(first) is True
    assert blobs.await_put(second) is True
    assert blobs.get("r1/x") == b"second"


def test_a_lone_queued_put_commits_at_the_end_of_its_linger(
    store: SqliteStore,
) -> None:
    """Q19: with no company it lands alone, after the linger, and says so."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    started = time.monotonic()
    queued = blobs.queue_put("r1/w/a", b"alone", lease, linger_s=0.05)
    assert blobs.await_put(queued) is False
    assert time.monotonic() - started >= 0.05
    assert blobs.get("r1/w/a") == b"alone"


def test_a_flush_lands_a_lingering_put_at_once(store: SqliteStore) -> None:
    """Q19: a reader's flush commits the queued put now; its waiter wakes landed."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    queued = blobs.queue_put("r1/w/a", b"to read", lease, linger_s=LONG_LINGER_S)
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(blobs.await_put(queued)))
    waiter.start()
    blobs.flush_queued()
    assert blobs.get("r1/w/a") == b"to read"
    waiter.join(timeout=LONG_LINGER_S / 2)
    assert outcome == [True]


def test_a_stale_queued_put_is_refused_alone(store: SqliteStore) -> None:
    """Q19 with F2/T7: a superseded lease's queued put is refused at await_put,
    changes nothing, and the write sharing its transaction lands."""
    blobs = store.transcripts()
    stale = store.acquire("r1", "me")
    blobs.put("r1/w/a", b"before", stale)
    current = _take_over(store, stale)
    queued = blobs.queue_put("r1/w/a", b"stale", stale, linger_s=LONG_LINGER_S)
    blobs.put("r1/c/1", b"current", current)
    with pytest.raises(LeaseHeldError):
        blobs.await_put(queued)
    assert blobs.get("r1/w/a") == b"before"
    assert blobs.get("r1/c/1") == b"current"


def _take_over(store: SqliteStore, lease: Lease) -> Lease:
    store.release(lease)
    return store.acquire(lease.run_id, "successor")


def test_queued_puts_of_many_threads_all_land(store: SqliteStore) -> None:
    """Q19: queued and plain writes from several threads: every one lands once."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            for i in range(40):
                ref = f"r1/w/{worker}-{i}"
                if i % 2:
                    blobs.await_put(blobs.queue_put(ref, ref.encode(), lease))
                else:
                    blobs.put(ref, ref.encode(), lease)
        except BaseException as exc:  # reported below, with the thread's name
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    refs = blobs.list_refs("r1")
    assert len(refs) == 160
    assert all(blobs.get(ref) == ref.encode() for ref in refs)


def test_an_interrupted_lingering_put_never_runs_and_blocks_nobody(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Q14 with Q19: a queued writer interrupted while it lingers takes its write
    back (it never lands) and gives up the lead, so later writes do not hang."""
    blobs = store.transcripts()
    lease = store.acquire("r1", "me")
    queued = blobs.queue_put("r1/w/a", b"interrupted", lease, linger_s=LONG_LINGER_S)

    def interrupted(self: Operation[object], deadline: float) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(Operation, "wait_until", interrupted)
    with pytest.raises(KeyboardInterrupt):
        blobs.await_put(queued)
    monkeypatch.undo()
    done = threading.Event()

    def later() -> None:
        blobs.put("r1/c/1", b"later", lease)
        done.set()

    threading.Thread(target=later, daemon=True).start()
    assert done.wait(timeout=LONG_LINGER_S / 2)
    assert blobs.get("r1/w/a") is None
    assert blobs.get("r1/c/1") == b"later"
