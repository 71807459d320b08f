"""The fence across instances: CONTRACT 13 X1-X5 and the Postgres specifics (P4, P5).

Two store instances (two pools) share one schema and one injected clock; a
takeover happens by moving that clock, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from rulvar_store import (
    ContractError,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    RunFilter,
    StoreBusyError,
    assert_fenced_writes,
)
from rulvar_store.backend import Failpoint, set_failpoint_hook
from rulvar_store_postgres import PostgresStore

pytestmark = pytest.mark.postgres

RUN = "x-run"
T0 = 1_000_000


class FakeClock:
    """A settable Unix-ms clock shared by both instances."""

    def __init__(self, start: int = T0) -> None:
        self.ms = start

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pair(
    make_store: Callable[..., PostgresStore], clock: FakeClock
) -> tuple[PostgresStore, PostgresStore]:
    """Instances A and B on one schema, ttl 100 on the shared clock.

    B's lock waits are short so that a takeover attempt inside A's transaction
    comes back busy quickly instead of waiting out the default bound.
    """
    a = make_store(ttl_ms=100, now=clock)
    b = make_store(ttl_ms=100, now=clock, lock_timeout_ms=200)
    return a, b


@pytest.fixture
def hook() -> Iterator[Callable[[Callable[[str, Failpoint], None]], None]]:
    """Install a failpoint hook for the test; always removed afterwards."""
    previous = set_failpoint_hook(None)

    def install(fn: Callable[[str, Failpoint], None]) -> None:
        set_failpoint_hook(fn)

    yield install
    set_failpoint_hook(previous)


def meta(status: str, segments: int) -> dict[str, Any]:
    return {
        "runId": RUN,
        "status": status,
        "segments": segments,
        "updatedAt": f"at-{status}-{segments}",
    }


# -- X1-X5 ---------------------------------------------------------------------


@pytest.mark.clause("X1")
def test_x1_superseded_terminal_put_meta_is_refused(
    pair: tuple[PostgresStore, PostgresStore], clock: FakeClock
) -> None:
    """X1: the old segment's late terminal put_meta cannot overwrite the successor's row."""
    a, b = pair
    lease_a = a.acquire(RUN, "segment-2")
    a.put_meta(meta("running", 2), lease_a)
    clock.advance(150)
    lease_b = b.acquire(RUN, "segment-3")
    b.put_meta(meta("running", 3), lease_b)
    with pytest.raises(LeaseHeldError):
        a.put_meta(meta("cancelled", 2), lease_a)
    assert a.get_meta(RUN) == meta("running", 3)
    assert b.get_meta(RUN) == meta("running", 3)
    swept = b.list_runs(RunFilter(statuses=["running", "suspended"]))
    assert [m["runId"] for m in swept] == [RUN]


@pytest.mark.clause("X2")
@pytest.mark.clause("X4")
def test_x2_stale_checkpoint_put_and_delete_are_refused(
    pair: tuple[PostgresStore, PostgresStore], clock: FakeClock
) -> None:
    """X2/X4: a stale owner can neither overwrite nor delete the shared checkpoint ref."""
    a, b = pair
    ref = f"{RUN}/ckpt/7"
    lease_a = a.acquire(RUN, "A")
    a.transcripts().put(ref, bytes([1]), lease_a)
    clock.advance(150)
    lease_b = b.acquire(RUN, "B")
    b.transcripts().put(ref, bytes([3]), lease_b)
    with pytest.raises(LeaseHeldError):
        a.transcripts().put(ref, bytes([2]), lease_a)
    with pytest.raises(LeaseHeldError):
        a.transcripts().delete(ref, lease_a)
    assert a.transcripts().get(ref) == bytes([3])
    assert b.transcripts().get(ref) == bytes([3])


def _takeover_must_be_busy(
    b: PostgresStore, clock: FakeClock, operation: str, outcomes: list[str]
) -> Callable[[str, Failpoint], None]:
    """A hook: inside A's transaction, after its fence check, try B's takeover."""
    armed = [True]

    def fire(op: str, point: Failpoint) -> None:
        if not (armed[0] and op == operation and point == "after-fence-check"):
            return
        armed[0] = False
        clock.advance(150)  # A's lease is now expired on the shared clock
        try:
            b.acquire(RUN, "B")
        except StoreBusyError:
            outcomes.append("busy")
        except Exception as exc:  # pragma: no cover - reported by the assertion
            outcomes.append(f"unexpected {type(exc).__name__}: {exc}")
        else:
            outcomes.append("acquired inside A's window")

    return fire


@pytest.mark.clause("X3")
@pytest.mark.parametrize("operation", ["append", "release", "blob_put"])
def test_x3_takeover_cannot_land_between_check_and_mutation(
    pair: tuple[PostgresStore, PostgresStore],
    clock: FakeClock,
    hook: Callable[[Callable[[str, Failpoint], None]], None],
    operation: str,
) -> None:
    """X3: after A's fence check passes, B's takeover waits (busy); A's write lands first.

    Then B takes over, every later write of A is refused, a third owner cannot
    acquire while B is live, and the journal shows exactly A's one entry.
    """
    a, b = pair
    lease_a = a.acquire(RUN, "A")
    outcomes: list[str] = []
    hook(_takeover_must_be_busy(b, clock, operation, outcomes))
    if operation == "append":
        a.append(RUN, {"seq": 0, "by": "A"}, lease_a)
    elif operation == "release":
        a.release(lease_a)
    else:
        a.transcripts().put(f"{RUN}/ckpt/1", b"A", lease_a)
    assert outcomes == ["busy"]

    lease_b = b.acquire(RUN, "B")
    assert lease_b.epoch > lease_a.epoch
    with pytest.raises(LeaseHeldError):
        a.append(RUN, {"seq": 1, "by": "A-late"}, lease_a)
    with pytest.raises(LeaseHeldError):
        a.transcripts().put(f"{RUN}/ckpt/1", b"A-late", lease_a)
    with pytest.raises(LeaseHeldError):
        a.release(lease_a)
    with pytest.raises(LeaseHeldError):
        a.acquire(RUN, "C")
    expected = [{"seq": 0, "by": "A"}] if operation == "append" else []
    assert b.load(RUN) == expected
    blob = b.transcripts().get(f"{RUN}/ckpt/1")
    assert blob == (b"A" if operation == "blob_put" else None)
    b.renew(lease_b)  # B's lease survived all of it


@pytest.mark.clause("X3")
def test_x3_stale_renew_cannot_extend_the_successor(
    pair: tuple[PostgresStore, PostgresStore], clock: FakeClock
) -> None:
    """X3: after B's takeover at +150 (ttl 100) A's renew raises; B holds until +250."""
    a, b = pair
    lease_a = a.acquire(RUN, "A")
    clock.advance(150)
    b.acquire(RUN, "B")
    with pytest.raises(LeaseHeldError):
        a.renew(lease_a)
    clock.advance(90)  # +240
    with pytest.raises(LeaseHeldError):
        a.acquire(RUN, "C")
    clock.advance(20)  # +260
    assert a.acquire(RUN, "C").epoch == lease_a.epoch + 2


@pytest.mark.clause("X4")
def test_x4_stale_run_delete_leaves_everything_intact(
    pair: tuple[PostgresStore, PostgresStore], clock: FakeClock
) -> None:
    """X4: a stale owner's delete raises and leaves journal, meta and blobs intact."""
    a, b = pair
    lease_a = a.acquire(RUN, "A")
    a.append(RUN, {"seq": 0}, lease_a)
    a.put_meta(meta("running", 1), lease_a)
    a.transcripts().put(f"{RUN}/t1", b"blob", lease_a)
    clock.advance(150)
    lease_b = b.acquire(RUN, "B")
    with pytest.raises(LeaseHeldError):
        a.delete(RUN, lease_a)
    with pytest.raises(LeaseHeldError):
        a.transcripts().delete(f"{RUN}/t1", lease_a)
    assert b.load(RUN) == [{"seq": 0}]
    assert b.get_meta(RUN) == meta("running", 1)
    assert b.transcripts().list_refs(RUN) == [f"{RUN}/t1"]
    b.delete(RUN, lease_b)
    assert b.load(RUN) == []
    assert b.get_meta(RUN) is None
    assert b.transcripts().get(f"{RUN}/t1") == b"blob"  # T5: blobs never cascade


@pytest.mark.clause("X5")
def test_x5_postgres_pair_declares_fenced_writes(
    make_store: Callable[..., PostgresStore],
) -> None:
    """X5: the store and its twin both declare the marker; assert_fenced_writes passes."""
    store = make_store()
    assert store.fenced_writes is True
    assert store.transcripts().fenced_writes is True
    assert_fenced_writes(store, store.transcripts())


# -- Postgres specifics ----------------------------------------------------------


@pytest.mark.clause("J6")
def test_seq_guard_compares_numerically(
    make_store: Callable[..., PostgresStore],
) -> None:
    """J6: 10 follows 9 (no text order), huge ints and floats compare exactly."""
    store = make_store()
    store.append("r", {"seq": 9})
    store.append("r", {"seq": 10})
    store.append("r", {"seq": 10.5})
    with pytest.raises(JournalOrderViolation):
        store.append("r", {"seq": 10.25})
    store.append("r", {"seq": 2**70})
    with pytest.raises(JournalOrderViolation):
        store.append("r", {"seq": 2**70})
    store.append("r", {"seq": 2**70 + 1})
    assert [e["seq"] for e in store.load("r")] == [9, 10, 10.5, 2**70, 2**70 + 1]


@pytest.mark.clause("D5")
def test_entries_without_a_finite_seq_bypass_the_guard(
    make_store: Callable[..., PostgresStore],
) -> None:
    """D5: no seq or a null seq: appended, and never counted by J6."""
    store = make_store()
    store.append("r", {"seq": 5})
    store.append("r", {"kind": "no-seq"})
    store.append("r", {"seq": None})
    store.append("r", {"seq": 6})
    assert len(store.load("r")) == 4


@pytest.mark.clause("D5")
def test_non_numeric_seq_is_a_typed_error_that_persists_nothing(
    make_store: Callable[..., PostgresStore],
) -> None:
    """D5: a present, non-null seq that is not a JSON number is refused, typed.

    Appendix P's index casts ``(payload::jsonb ->> 'seq')::numeric``, so PostgreSQL
    refuses every such seq (numeric-looking strings too), non-retryable, nothing kept.
    """
    store = make_store()
    for bad in (True, "not-a-number", "1", "1e3", "99", [1], {"nested": 1}):
        with pytest.raises(ContractError) as caught:
            store.append("r", {"seq": bad})
        assert not caught.value.retryable
    assert store.load("r") == []


@pytest.mark.clause("D2")
def test_non_json_value_persists_nothing(
    make_store: Callable[..., PostgresStore],
) -> None:
    """D2: a non-JSON value raises before anything is sent."""
    store = make_store()
    with pytest.raises((TypeError, ValueError)):
        store.append("r", {"seq": 0, "bad": {1, 2}})
    with pytest.raises((TypeError, ValueError)):
        store.put_meta({"runId": "r", "status": "ok", "x": float("nan")})
    assert store.load("r") == []
    assert store.get_meta("r") is None


@pytest.mark.clause("D3")
def test_blob_input_is_copied_at_the_boundary(
    make_store: Callable[..., PostgresStore],
) -> None:
    """D3: mutating a bytearray after put leaves the stored blob unchanged."""
    twin = make_store().transcripts()
    data = bytearray(b"abc")
    twin.put("r/blob", data)
    data[0] = ord("z")
    twin.put("r/view", memoryview(b"mv"))
    assert twin.get("r/blob") == b"abc"
    assert twin.get("r/view") == b"mv"
    assert isinstance(twin.get("r/blob"), bytes)


@pytest.mark.clause("P5")
def test_lease_time_comes_from_the_server_clock(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """P5: without an injected clock, expires_at = server clock_timestamp() + ttl."""
    store = make_store(ttl_ms=5_000)
    store.get_meta("boot-probe")
    server_ms = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    (before,) = admin.execute(server_ms).fetchone() or (0,)
    store.acquire("r", "o")
    (after,) = admin.execute(server_ms).fetchone() or (0,)
    (expires_at,) = admin.execute(
        f'SELECT expires_at FROM "{schema}".rulvar_leases WHERE run_id = %s', ("r",)
    ).fetchone() or (0,)
    assert before + 5_000 <= expires_at <= after + 5_000


@pytest.mark.clause("P5")
def test_injected_clock_overrides_the_server_clock(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """P5: an injected now decides expiry (here: far in the past of the server)."""
    clock = FakeClock(start=42)
    store = make_store(ttl_ms=100, now=clock)
    lease = store.acquire("r", "o")
    (expires_at,) = admin.execute(
        f'SELECT expires_at FROM "{schema}".rulvar_leases WHERE run_id = %s', ("r",)
    ).fetchone() or (0,)
    assert expires_at == 142
    clock.advance(100)  # expires_at == now is expired
    with pytest.raises(LeaseHeldError):
        store.renew(lease)


@pytest.mark.clause("P4")
def test_unrelated_runs_do_not_queue_behind_each_other(
    make_store: Callable[..., PostgresStore],
    hook: Callable[[Callable[[str, Failpoint], None]], None],
) -> None:
    """P4: while one run's lock is held, another instance writes a different run."""
    a = make_store()
    b = make_store(lock_timeout_ms=200)
    a.get_meta("boot-probe")
    results: list[str] = []

    def fire(op: str, point: Failpoint) -> None:
        if op == "append" and point == "after-fence-check" and not results:
            results.append("inside")
            b.append("other-run", {"seq": 0})  # would be busy if runs shared a lock
            try:
                b.append("held-run", {"seq": 1})
            except StoreBusyError:
                results.append("same run busy")

    hook(fire)
    a.append("held-run", {"seq": 0})
    assert results == ["inside", "same run busy"]
    assert b.load("other-run") == [{"seq": 0}]
    assert b.load("held-run") == [{"seq": 0}]


@pytest.mark.clause("F2")
def test_run_mismatch_is_refused_before_any_database_work() -> None:
    """F2: a foreign lease is refused without connecting (the server here is unreachable)."""
    store = PostgresStore("postgresql://nobody@127.0.0.1:1/none", schema="s")
    foreign = Lease("other", "o", 1)
    with pytest.raises(LeaseHeldError):
        store.append("r", {"seq": 0}, foreign)
    with pytest.raises(LeaseHeldError):
        store.put_meta({"runId": "r", "status": "x"}, foreign)
    with pytest.raises(LeaseHeldError):
        store.delete("r", foreign)
    with pytest.raises(LeaseHeldError):
        store.transcripts().put("r/x", b"", foreign)
    with pytest.raises(LeaseHeldError):
        store.transcripts().delete("r/x", foreign)
    store.close()


@pytest.mark.clause("T4")
def test_list_refs_lists_only_the_runs_slashed_refs_in_code_point_order(
    make_store: Callable[..., PostgresStore],
) -> None:
    """T4: refs under run + '/', sorted by code point; the bare run id and r2/* excluded."""
    twin = make_store().transcripts()
    for ref in ("r/b", "r/B", "r/é", "r/a/1", "r", "r2/x", "rr/y"):
        twin.put(ref, b"1")
    assert twin.list_refs("r") == sorted(["r/b", "r/B", "r/é", "r/a/1"])
    twin.delete("r/b")
    twin.delete("r/b")  # T2: a missing ref is a no-op
    assert twin.get("r/b") is None


@pytest.mark.clause("T7")
def test_twin_is_memoized_and_closes_with_the_store(
    make_store: Callable[..., PostgresStore],
) -> None:
    """T7: one twin per instance; closing the store closes it too."""
    store = make_store()
    twin = store.transcripts()
    assert store.transcripts() is twin
    twin.put("r/x", b"1")
    store.close()
    with pytest.raises(ContractError):
        twin.get("r/x")
    with pytest.raises(ContractError):
        store.load("r")


@pytest.mark.clause("X7")
def test_threads_sharing_one_instance_keep_complete_ordered_journals(
    make_store: Callable[..., PostgresStore],
) -> None:
    """8 threads on ONE instance, each on its own run: 50 fenced appends plus renews."""
    store = make_store(pool_max_size=4)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            run = f"thread-run-{n}"
            lease = store.acquire(run, f"owner-{n}")
            for seq in range(50):
                store.append(run, {"seq": seq, "n": n}, lease)
                if seq % 10 == 9:
                    store.renew(lease)
            store.release(lease)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    for n in range(8):
        assert store.load(f"thread-run-{n}") == [{"seq": s, "n": n} for s in range(50)]


@pytest.mark.clause("J6")
def test_two_instances_racing_on_one_tail_never_duplicate(
    make_store: Callable[..., PostgresStore],
) -> None:
    """J6 across pools: 2 instances x 3 threads race to append tail+1; no seq twice."""
    stores = [make_store(), make_store()]
    stores[0].append("race", {"seq": 0})
    wins: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def racer(store: PostgresStore) -> None:
        try:
            for _ in range(15):
                tail = max(e["seq"] for e in store.load("race"))
                try:
                    store.append("race", {"seq": tail + 1})
                except JournalOrderViolation:
                    continue
                with lock:
                    wins.append(tail + 1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=racer, args=(stores[i % 2],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    seqs = [e["seq"] for e in stores[1].load("race")]
    assert seqs == sorted(set(seqs))
    assert sorted(wins) == seqs[1:]


class _Crash(Exception):
    """Stands in for a process dying at a failpoint."""


@pytest.mark.clause("L7")
def test_every_mutation_hits_the_four_failpoints_in_order(
    make_store: Callable[..., PostgresStore],
    hook: Callable[[Callable[[str, Failpoint], None]], None],
) -> None:
    """Each mutation is one transaction with after-begin .. after-commit, in order."""
    store = make_store()
    twin = store.transcripts()
    seen: list[tuple[str, Failpoint]] = []
    hook(lambda op, point: seen.append((op, point)))
    lease = store.acquire("r", "o")
    store.append("r", {"seq": 0}, lease)
    store.put_meta({"runId": "r", "status": "running"}, lease)
    twin.put("r/b", b"x", lease)
    twin.delete("r/b", lease)
    store.renew(lease)
    store.delete("r", lease)
    store.release(store.acquire("r", "o"))
    points = [
        "after-begin",
        "after-fence-check",
        "before-commit",
        "after-send",
        "after-commit",
    ]
    ops = [
        "acquire",
        "append",
        "put_meta",
        "blob_put",
        "blob_delete",
        "renew",
        "delete",
        "acquire",
        "release",
    ]
    assert seen == [(op, point) for op in ops for point in points]


@pytest.mark.clause("J1")
@pytest.mark.parametrize("point", ["after-begin", "after-fence-check", "before-commit"])
def test_a_crash_before_commit_leaves_nothing(
    make_store: Callable[..., PostgresStore],
    hook: Callable[[Callable[[str, Failpoint], None]], None],
    point: Failpoint,
) -> None:
    """J1/F3: dying before COMMIT persists nothing; the store keeps working."""
    store = make_store()
    lease = store.acquire("r", "o")

    def crash(op: str, at: Failpoint) -> None:
        if at == point:
            raise _Crash(op)

    hook(crash)
    with pytest.raises(_Crash):
        store.append("r", {"seq": 0}, lease)
    with pytest.raises(_Crash):
        store.put_meta({"runId": "r", "status": "x"}, lease)
    with pytest.raises(_Crash):
        store.transcripts().put("r/b", b"x", lease)
    with pytest.raises(_Crash):
        store.release(lease)
    hook(lambda op, at: None)
    assert store.load("r") == []
    assert store.get_meta("r") is None
    assert store.transcripts().get("r/b") is None
    store.renew(lease)  # the release never happened either


@pytest.mark.clause("J1")
def test_a_failure_after_commit_is_never_retried(
    make_store: Callable[..., PostgresStore],
    hook: Callable[[Callable[[str, Failpoint], None]], None],
) -> None:
    """An error raised after COMMIT surfaces as is; the committed append stays single."""
    import psycopg.errors

    store = make_store()

    def after(op: str, at: Failpoint) -> None:
        if at == "after-commit":
            raise psycopg.errors.SerializationFailure("injected after commit")

    hook(after)
    with pytest.raises(psycopg.errors.SerializationFailure):
        store.append("r", {"seq": 0})
    hook(lambda op, at: None)
    assert store.load("r") == [{"seq": 0}]
