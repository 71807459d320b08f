"""CONTRACT 13 pitfalls X1-X5 and X7, each with two instances over one temp file."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from rulvar_store import (
    ConfigError,
    Lease,
    LeaseHeldError,
    MemoryTranscriptStore,
    RunFilter,
    StoreBusyError,
    assert_fenced_writes,
)
from rulvar_store_sqlite import SqliteStore
from tests.sqlite._sqlite_support import Clock, entry, meta

RUN = "run"


class WindowStore(SqliteStore):
    """Runs ``in_window`` once, right after a fence check passes (the Q13 seam)."""

    in_window: Callable[[], None] | None = None

    def _assert_fencing(self, lease: Lease) -> None:
        super()._assert_fencing(lease)
        hook, self.in_window = self.in_window, None
        if hook is not None:
            hook()


@pytest.mark.clause("X1")
def test_superseded_terminal_meta_is_refused_and_the_run_stays_listed(
    store: SqliteStore, other: SqliteStore, clock: Clock
) -> None:
    """A's late cancelled/2 meta bounces; B's running/3 stays and sweeps still see it."""
    lease_a = store.acquire(RUN, "A")
    store.put_meta(meta(RUN, "running", segments=2), lease_a)
    clock.advance(150)
    lease_b = other.acquire(RUN, "B")
    other.put_meta(meta(RUN, "running", segments=3), lease_b)
    with pytest.raises(LeaseHeldError):
        store.put_meta(meta(RUN, "cancelled", segments=2), lease_a)
    assert other.get_meta(RUN) == meta(RUN, "running", segments=3)
    swept = other.list_runs(RunFilter(statuses=["running", "suspended"]))
    assert [m["runId"] for m in swept] == [RUN]


@pytest.mark.clause("X2")
def test_stale_checkpoint_put_and_delete_are_refused(
    store: SqliteStore, other: SqliteStore, clock: Clock
) -> None:
    """After B's takeover, A's put [2] and delete raise; both instances read [3]."""
    ref = f"{RUN}/ckpt/7"
    lease_a = store.acquire(RUN, "A")
    store.transcripts().put(ref, b"[1]", lease_a)
    clock.advance(150)
    lease_b = other.acquire(RUN, "B")
    other.transcripts().put(ref, b"[3]", lease_b)
    with pytest.raises(LeaseHeldError):
        store.transcripts().put(ref, b"[2]", lease_a)
    with pytest.raises(LeaseHeldError):
        store.transcripts().delete(ref, lease_a)
    assert store.transcripts().get(ref) == b"[3]"
    assert other.transcripts().get(ref) == b"[3]"


def _window_op(name: str) -> Callable[[SqliteStore, Lease], None]:
    ops: dict[str, Callable[[SqliteStore, Lease], None]] = {
        "append": lambda s, lease: s.append(RUN, entry(0), lease),
        "release": lambda s, lease: s.release(lease),
        "blob put": lambda s, lease: s.transcripts().put(f"{RUN}/b", b"A", lease),
    }
    return ops[name]


@pytest.mark.clause("X3")
@pytest.mark.clause("Q13")
@pytest.mark.parametrize("operation", ["append", "release", "blob put"])
def test_takeover_cannot_land_between_fence_check_and_mutation(
    db_path: str, clock: Clock, operation: str
) -> None:
    """A takeover tried inside A's window fails busy; A's write lands first, then B owns."""
    a = WindowStore(db_path, ttl_ms=100, now=clock)
    b = SqliteStore(db_path, ttl_ms=100, busy_timeout_ms=20, now=clock)
    try:
        lease_a = a.acquire(RUN, "A")
        in_window: list[BaseException] = []

        def takeover() -> None:
            clock.advance(150)  # A's lease is now expired, but A already passed
            try:
                b.acquire(RUN, "B")
            except StoreBusyError as exc:  # A holds BEGIN IMMEDIATE
                in_window.append(exc)

        a.in_window = takeover
        _window_op(operation)(a, lease_a)
        assert len(in_window) == 1, "B's acquire must fail busy inside A's window"

        lease_b = b.acquire(RUN, "B")
        assert lease_b.epoch > lease_a.epoch
        with pytest.raises(LeaseHeldError):
            a.append(RUN, entry(1), lease_a)
        with pytest.raises(LeaseHeldError):
            a.transcripts().put(f"{RUN}/b", b"late", lease_a)
        with pytest.raises(LeaseHeldError):
            a.release(lease_a)
        with pytest.raises(LeaseHeldError):
            a.acquire(RUN, "C")
        expected = [entry(0)] if operation == "append" else []
        assert b.load(RUN) == expected
        blob = b.transcripts().get(f"{RUN}/b")
        assert blob == (b"A" if operation == "blob put" else None)
    finally:
        a.close()
        b.close()


@pytest.mark.clause("X3")
@pytest.mark.clause("Q8")
def test_stale_renew_after_takeover_never_extends_the_successor(
    store: SqliteStore, other: SqliteStore, clock: Clock
) -> None:
    """A's renew after B's takeover at +150 raises; B holds at +240, frees at +260."""
    lease_a = store.acquire(RUN, "A")
    clock.advance(150)
    other.acquire(RUN, "B")
    with pytest.raises(LeaseHeldError):
        store.renew(lease_a)
    clock.advance(90)  # +240: B (acquired at +150, ttl 100) is still live
    with pytest.raises(LeaseHeldError):
        store.acquire(RUN, "C")
    clock.advance(20)  # +260: B expired, nobody extended it
    assert store.acquire(RUN, "C").owner == "C"


@pytest.mark.clause("X4")
def test_stale_run_delete_is_refused_and_keeps_everything(
    store: SqliteStore, other: SqliteStore, clock: Clock
) -> None:
    """A stale delete_run cascade raises at its first blob and leaves all intact."""
    lease_a = store.acquire(RUN, "A")
    store.append(RUN, entry(0), lease_a)
    store.put_meta(meta(RUN, "running"), lease_a)
    store.transcripts().put(f"{RUN}/ckpt/1", b"x", lease_a)
    clock.advance(150)
    other.acquire(RUN, "B")

    def delete_run(lease: Lease) -> None:  # R1: blobs first, then the journal
        blobs = store.transcripts()
        for ref in blobs.list_refs(RUN):
            blobs.delete(ref, lease)
        store.delete(RUN, lease)

    with pytest.raises(LeaseHeldError):
        delete_run(lease_a)
    with pytest.raises(LeaseHeldError):
        store.delete(RUN, lease_a)
    assert other.load(RUN) == [entry(0)]
    assert other.get_meta(RUN) == meta(RUN, "running")
    assert other.transcripts().list_refs(RUN) == [f"{RUN}/ckpt/1"]


@pytest.mark.clause("X5")
def test_sqlite_pair_declares_fenced_writes_and_unfenced_stores_do_not(
    store: SqliteStore,
) -> None:
    """assert_fenced_writes passes for the SQLite pair and names an unfenced twin."""
    assert_fenced_writes(store, store.transcripts())
    with pytest.raises(ConfigError, match="MemoryTranscriptStore"):
        assert_fenced_writes(store, MemoryTranscriptStore())


@pytest.mark.clause("X7")
@pytest.mark.clause("Q9")
def test_eight_threads_share_one_instance_with_fenced_appends_and_renews(
    db_path: str,
) -> None:
    """8 threads, one instance, own run each: 50 fenced appends + renews, all ordered."""
    store = SqliteStore(db_path, ttl_ms=60_000)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        try:
            run_id = f"thread-{n}"
            lease = store.acquire(run_id, f"owner-{n}")
            start.wait()
            for seq in range(50):
                store.append(run_id, entry(seq, thread=n), lease)
                if seq % 10 == 9:
                    store.renew(lease)
            store.release(lease)
        except BaseException as exc:  # reported below, with the thread's story
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert errors == []
        for n in range(8):
            assert store.load(f"thread-{n}") == [entry(s, thread=n) for s in range(50)]
    finally:
        store.close()


@pytest.mark.clause("X7")
@pytest.mark.clause("D5")
def test_true_seq_bypasses_the_guard_instead_of_acting_as_one(
    store: SqliteStore,
) -> None:
    """seq True is not a finite seq: it never blocks seq 1 and is never blocked."""
    store.append(RUN, entry(True))
    store.append(RUN, entry(1))
    store.append(RUN, entry(True))
    assert [e["seq"] for e in store.load(RUN)] == [True, 1, True]


@pytest.mark.clause("X7")
@pytest.mark.clause("D3")
def test_mutating_a_bytearray_after_put_leaves_the_blob_unchanged(
    store: SqliteStore, other: SqliteStore
) -> None:
    """The twin copies bytes-like input at put and returns bytes."""
    blob = bytearray(b"abc")
    store.transcripts().put(f"{RUN}/b", blob)
    blob[0] = ord("x")
    store.transcripts().put(f"{RUN}/m", memoryview(b"mv"))
    assert other.transcripts().get(f"{RUN}/b") == b"abc"
    assert type(other.transcripts().get(f"{RUN}/m")) is bytes


@pytest.mark.clause("X7")
@pytest.mark.clause("D2")
@pytest.mark.parametrize(
    "bad", [{1, 2}, math.nan, math.inf, datetime(2026, 1, 1)], ids=repr
)
def test_non_json_value_persists_nothing(
    store: SqliteStore, other: SqliteStore, bad: Any
) -> None:
    """A set, NaN, Infinity or datetime raises TypeError/ValueError; nothing lands."""
    lease = store.acquire(RUN, "A")
    with pytest.raises((TypeError, ValueError)):
        store.append(RUN, entry(0, value=bad), lease)
    with pytest.raises((TypeError, ValueError)):
        store.put_meta(meta(RUN, "running", value=bad), lease)
    assert other.load(RUN) == []
    assert other.get_meta(RUN) is None
