"""SqliteStore behaviour beyond the kit: snapshots, seqs, deletes, blobs, filters, errors."""

from __future__ import annotations

import struct
from typing import Any

import apsw
import pytest

from rulvar_store import (
    ContractError,
    JournalOrderViolation,
    LeasableStore,
    Lease,
    LeaseHeldError,
    MetaLookupStore,
    RunFilter,
    TranscriptStore,
)
from rulvar_store.backend import set_failpoint_hook
from rulvar_store_sqlite import SqliteFencedTranscriptStore, SqliteStore
from tests.sqlite._sqlite_support import Clock, entry, meta

RUN = "run"


@pytest.mark.clause("D3")
def test_mutating_inputs_and_loaded_records_never_changes_history(
    store: SqliteStore,
) -> None:
    """Dicts are serialized at the call and parsed fresh on every read."""
    record: dict[str, Any] = {"seq": 0, "value": {"n": 1}}
    store.append(RUN, record)
    record["value"]["n"] = 2
    loaded = store.load(RUN)
    loaded[0]["value"]["n"] = 3
    the_meta = meta(RUN, "running", extra={"k": 1})
    store.put_meta(the_meta)
    the_meta["extra"]["k"] = 2
    got = store.get_meta(RUN)
    assert got is not None
    got["extra"]["k"] = 3
    assert store.load(RUN) == [{"seq": 0, "value": {"n": 1}}]
    assert store.get_meta(RUN) == meta(RUN, "running", extra={"k": 1})


@pytest.mark.clause("J6")
@pytest.mark.parametrize(
    ("stored", "new", "accepted"),
    [
        (1.5, 1, False),  # a cast index would see 1 >= 1 too, the exact test decides
        (0.5, 0.7, True),  # truncation would call these equal
        (2, 2.5, True),
        (-1.2, -1.5, False),
        (2**62, 2**62 + 1, True),  # exact int64, no detour through doubles
        (2**63 + 10, 2**62, False),
        # Beyond int64 both sides are one double: the exact text decides (J6).
        (2**63, 2**63 + 1, True),
        (2**63 + 1, 2**63, False),
        (2**63 + 1, 2**63 + 1, False),
        (-(2**63) - 2, -(2**63) - 1, True),
        (10**40, 10**40 + 1, True),
        (10**40 + 1, 10**40, False),
        (1e300, 10**300, False),  # the double 1e300 is 10**300 + 5.25e283
        (10**300, 1e300, True),
        (2.0**70, 2**70, False),  # equal values: not strictly above
        (2**70, 2**70 + 1.0, False),  # the float is 2**70 again
        ("9", 1, True),  # a string seq is not a seq (D5)
    ],
)
def test_seq_guard_compares_numerically_not_through_the_truncating_cast(
    store: SqliteStore, stored: Any, new: Any, accepted: bool
) -> None:
    """The A5 guard compares stored and new seqs as numbers (Q7)."""
    store.append(RUN, entry(stored))
    if accepted:
        store.append(RUN, entry(new))
        assert [e["seq"] for e in store.load(RUN)] == [stored, new]
    else:
        with pytest.raises(JournalOrderViolation) as raised:
            store.append(RUN, entry(new))
        assert raised.value.code == "journal_order_violation"
        assert store.load(RUN) == [entry(stored)]


@pytest.mark.clause("J6")
def test_entries_without_a_finite_seq_are_appended_unguarded(
    store: SqliteStore,
) -> None:
    """No seq, None or a string: plain inserts that never raise (D5)."""
    store.append(RUN, entry(5))
    store.append(RUN, {"kind": "note"})
    store.append(RUN, entry(None))
    store.append(RUN, entry("1"))
    assert len(store.load(RUN)) == 4


@pytest.mark.clause("J7")
def test_stale_lease_wins_over_stale_seq(
    store: SqliteStore, other: SqliteStore, clock: Clock
) -> None:
    """A stale lease with a stale seq raises LeaseHeldError, not the order error."""
    lease_a = store.acquire(RUN, "A")
    store.append(RUN, entry(0), lease_a)
    clock.advance(150)
    other.acquire(RUN, "B")
    with pytest.raises(LeaseHeldError):
        store.append(RUN, entry(0), lease_a)


@pytest.mark.clause("L5")
def test_epoch_tombstone_survives_delete_and_recreate(
    store: SqliteStore, other: SqliteStore
) -> None:
    """After delete, the same run id and owner acquire a higher epoch; the zombie is out."""
    zombie = store.acquire(RUN, "stable-owner")
    store.append(RUN, entry(0), zombie)
    store.delete(RUN)  # unleased: removes the live lease row too
    fresh = other.acquire(RUN, "stable-owner")
    assert fresh.epoch > zombie.epoch
    with pytest.raises(LeaseHeldError):
        store.append(RUN, entry(0), zombie)
    with pytest.raises(LeaseHeldError):
        store.renew(zombie)
    assert other.load(RUN) == []


@pytest.mark.clause("M6")
def test_delete_removes_entries_meta_and_lease_but_keeps_blobs_and_epoch(
    store: SqliteStore, other: SqliteStore
) -> None:
    """delete(run) drops journal, meta and lease row together; blobs and epoch stay."""
    lease = store.acquire(RUN, "A")
    store.append(RUN, entry(0), lease)
    store.put_meta(meta(RUN, "running"), lease)
    store.transcripts().put(f"{RUN}/b", b"x", lease)
    store.delete(RUN, lease)
    assert other.load(RUN) == []
    assert other.get_meta(RUN) is None
    assert other.transcripts().get(f"{RUN}/b") == b"x"
    assert other.acquire(RUN, "B").epoch == lease.epoch + 1
    other.delete("never-existed")  # unknown run: no-op


@pytest.mark.clause("M6")
def test_leased_delete_needs_the_live_lease(
    store: SqliteStore, other: SqliteStore
) -> None:
    """A released lease cannot delete; nothing is removed."""
    lease = store.acquire(RUN, "A")
    store.append(RUN, entry(0), lease)
    store.release(lease)
    with pytest.raises(LeaseHeldError):
        store.delete(RUN, lease)
    assert other.load(RUN) == [entry(0)]


@pytest.mark.clause("T2")
def test_missing_blob_reads_none_and_deletes_as_noop(store: SqliteStore) -> None:
    """get of a missing ref is None; delete of one is a no-op, also under a live lease."""
    blobs = store.transcripts()
    lease = store.acquire(RUN, "A")
    assert blobs.get(f"{RUN}/missing") is None
    blobs.delete(f"{RUN}/missing")
    blobs.delete(f"{RUN}/missing", lease)


@pytest.mark.clause("T4")
def test_list_refs_is_the_sorted_prefix_set(store: SqliteStore) -> None:
    """Refs starting with 'run/' in order; the slashless ref and run-10 are not listed."""
    blobs = store.transcripts()
    for ref in ["run/t2", "run/ckpt/7", "run", "run-10/x", "run/t10", "runx/y"]:
        blobs.put(ref, b"x")
    assert blobs.list_refs(RUN) == ["run/ckpt/7", "run/t10", "run/t2"]
    assert blobs.get("run") == b"x"
    blobs.put("a/b/c", b"y")
    assert blobs.list_refs("a/b") == ["a/b/c"]
    assert blobs.list_refs("nothing") == []


@pytest.mark.clause("T1")
def test_blob_put_overwrites_in_place(store: SqliteStore) -> None:
    """A second put of one ref replaces the bytes."""
    blobs = store.transcripts()
    blobs.put(f"{RUN}/b", b"\x00\x01")
    blobs.put(f"{RUN}/b", b"\x02")
    assert blobs.get(f"{RUN}/b") == b"\x02"
    assert blobs.list_refs(RUN) == [f"{RUN}/b"]


@pytest.mark.clause("T1")
def test_blob_overwrite_in_place_writes_no_index_page(
    store: SqliteStore, db_path: str
) -> None:
    """An overwrite changes the row's data alone: no page of either blob index.

    The WAL of the overwrite's commit is read frame by frame and each page
    named by dbstat. Setting run_id again (the ref's run, unchanged) made
    SQLite rewrite the row's blobs_by_run entry, one more page per commit.
    """
    blobs = store.transcripts()
    lease = store.acquire(RUN, "owner")
    for n in range(300):  # the row's index entries on pages of their own
        blobs.put(f"{RUN}/fill/{n:04d}", b"f" * 100, lease)
    blobs.put(f"{RUN}/pointer", b"old", lease)
    blobs.put(f"{RUN}/zz/{'t' * 40}", b"t" * 100, lease)
    reader = apsw.Connection(db_path)
    try:
        reader.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        blobs.put(f"{RUN}/pointer", b"new", lease)
        names = {
            int(page): str(name)
            for name, page in reader.execute("SELECT name, pageno FROM dbstat")
        }
    finally:
        reader.close()
    with open(f"{db_path}-wal", "rb") as wal:
        written = _wal_pages(wal.read())
    assert {names.get(page, f"page {page}") for page in written} == {"blobs"}
    assert blobs.get(f"{RUN}/pointer") == b"new"


def _wal_pages(wal: bytes, page_size: int = 4096) -> set[int]:
    """Page numbers of every frame in a WAL file (a 32-byte header, then frames)."""
    pages: set[int] = set()
    for offset in range(32, len(wal) - 24, 24 + page_size):
        pages.add(struct.unpack(">I", wal[offset : offset + 4])[0])
    return pages


@pytest.mark.clause("Q11")
def test_list_runs_narrows_in_sql_and_orders_by_run_id(store: SqliteStore) -> None:
    """status/statuses/name/tags filter exactly; statuses=[] alone matches nothing."""
    store.put_meta(meta("c", "running", name="wf", tags=["a", "b"]))
    store.put_meta(meta("a", "suspended", name="wf"))
    store.put_meta(meta("b", "ok", name="other", tags=["a"]))

    def ids(run_filter: RunFilter | None) -> list[str]:
        return [m["runId"] for m in store.list_runs(run_filter)]

    assert ids(None) == ["a", "b", "c"]
    assert ids(RunFilter(statuses=[])) == []
    assert ids(RunFilter(status="ok", statuses=[])) == ["b"]
    assert ids(RunFilter(statuses=["running", "suspended"])) == ["a", "c"]
    assert ids(RunFilter(status="ok", statuses=["running"])) == ["b", "c"]
    assert ids(RunFilter(name="wf")) == ["a", "c"]
    assert ids(RunFilter(tags=["a"])) == ["b", "c"]
    assert ids(RunFilter(tags=["a", "b"], name="wf")) == ["c"]
    assert ids(RunFilter(status="missing")) == []


@pytest.mark.clause("M5")
def test_get_meta_agrees_with_list_runs_and_misses_as_none(store: SqliteStore) -> None:
    """get_meta is a point lookup; an unknown run is None, never an error."""
    store.put_meta(meta(RUN, "running", soak={"nonce": "n"}))
    assert store.get_meta(RUN) == store.list_runs()[0]
    assert store.get_meta("missing") is None


@pytest.mark.clause("Q10")
def test_memory_databases_are_private_per_instance() -> None:
    """Two ':memory:' stores share nothing."""
    with SqliteStore(":memory:") as a, SqliteStore(":memory:") as b:
        a.append(RUN, entry(0))
        a.acquire(RUN, "A")
        assert b.load(RUN) == []
        assert b.acquire(RUN, "B").epoch == 1


def test_store_satisfies_the_spi_protocols(store: SqliteStore) -> None:
    """The store is a leasable, meta-lookup journal; its twin a transcript store."""
    assert isinstance(store, LeasableStore)
    assert isinstance(store, MetaLookupStore)
    assert isinstance(store.transcripts(), TranscriptStore)
    assert store.fenced_writes is True
    assert store.transcripts().fenced_writes is True
    assert store.lease_ttl_ms == 100


@pytest.mark.clause("T7")
def test_transcripts_twin_is_memoized_and_closes_with_the_store(db_path: str) -> None:
    """One twin per instance; closing the store ends it (typed error after)."""
    store = SqliteStore(db_path)
    twin = store.transcripts()
    assert store.transcripts() is twin
    assert isinstance(twin, SqliteFencedTranscriptStore)
    twin.close()  # closing the twin alone changes nothing
    twin.put(f"{RUN}/b", b"x")
    store.close()
    store.close()  # idempotent
    with pytest.raises(ContractError):
        twin.get(f"{RUN}/b")


@pytest.mark.clause("T7")
def test_memory_twin_sees_the_leases_of_its_store() -> None:
    """For ':memory:' the twin fences with the store's own lease rows."""
    with SqliteStore(":memory:") as store:
        lease = store.acquire(RUN, "A")
        store.transcripts().put(f"{RUN}/b", b"x", lease)
        store.release(lease)
        with pytest.raises(LeaseHeldError):
            store.transcripts().put(f"{RUN}/b", b"y", lease)
        assert store.transcripts().get(f"{RUN}/b") == b"x"


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.put_meta({"status": "running"}), ContractError),
        (lambda s: s.put_meta(["not", "a", "dict"]), ContractError),
        (lambda s: s.transcripts().put(f"{RUN}/b", "text"), ContractError),
        (lambda s: s.append(RUN, ["not", "a", "dict"]), ContractError),
        (lambda s: s.append(7, entry(0)), ContractError),
        (lambda s: s.append(RUN, entry(0), lease=("run", "A", 1)), ContractError),
        (lambda s: s.renew(None), ContractError),
        (lambda s: s.acquire(RUN, 5), ContractError),
        (lambda s: s.list_runs(RunFilter(statuses="running")), ContractError),
        (lambda s: s.list_runs({"status": "x"}), ContractError),
        (lambda s: s.load(None), ContractError),
    ],
    ids=[
        "meta-without-runId",
        "meta-not-a-dict",
        "blob-not-bytes",
        "entry-not-a-dict",
        "run-id-not-str",
        "lease-not-a-Lease",
        "renew-without-lease",
        "owner-not-str",
        "statuses-as-str",
        "filter-not-RunFilter",
        "load-run-id-none",
    ],
)
def test_bad_input_raises_a_typed_error_and_writes_nothing(
    store: SqliteStore, call: Any, error: type[Exception]
) -> None:
    """Bad arguments raise the SPI's ContractError, never a driver or attribute error."""
    with pytest.raises(error):
        call(store)
    assert store.load(RUN) == []
    assert store.list_runs() == []


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.append(RUN, entry(0)),
        lambda s: s.load(RUN),
        lambda s: s.acquire(RUN, "A"),
        lambda s: s.list_runs(),
        lambda s: s.get_meta(RUN),
        lambda s: s.transcripts(),
        lambda s: s.renew(Lease(RUN, "A", 1)),
    ],
    ids=["append", "load", "acquire", "list_runs", "get_meta", "transcripts", "renew"],
)
def test_use_after_close_raises_contract_error(db_path: str, call: Any) -> None:
    """A closed store refuses every call with a typed error."""
    store = SqliteStore(db_path)
    store.close()
    with pytest.raises(ContractError, match="closed"):
        call(store)


@pytest.mark.clause("Q6")
def test_transaction_passes_the_failpoints_in_order(store: SqliteStore) -> None:
    """after-begin, after-fence-check, before-commit, after-commit, for each write."""
    seen: list[tuple[str, str]] = []
    previous = set_failpoint_hook(lambda op, point: seen.append((op, point)))
    try:
        lease = store.acquire(RUN, "A")
        store.append(RUN, entry(0), lease)
    finally:
        set_failpoint_hook(previous)
    points = ["after-begin", "after-fence-check", "before-commit", "after-commit"]
    assert seen == [("acquire", p) for p in points] + [("append", p) for p in points]


@pytest.mark.clause("Q6")
@pytest.mark.parametrize("point", ["after-begin", "after-fence-check", "before-commit"])
def test_failure_inside_the_transaction_rolls_everything_back(
    store: SqliteStore, other: SqliteStore, point: str
) -> None:
    """An error at any point before COMMIT leaves nothing visible and no open txn."""
    lease = store.acquire(RUN, "A")

    def explode(operation: str, at: str) -> None:
        if at == point:
            raise RuntimeError(f"boom at {at}")

    previous = set_failpoint_hook(explode)
    try:
        with pytest.raises(RuntimeError):
            store.append(RUN, entry(0), lease)
        with pytest.raises(RuntimeError):
            store.put_meta(meta(RUN, "running"), lease)
        with pytest.raises(RuntimeError):
            store.transcripts().put(f"{RUN}/b", b"x", lease)
    finally:
        set_failpoint_hook(previous)
    assert not store._conn.in_transaction
    assert other.load(RUN) == []
    assert other.get_meta(RUN) is None
    assert other.transcripts().get(f"{RUN}/b") is None
    store.append(RUN, entry(0), lease)  # and the store still works
    assert other.load(RUN) == [entry(0)]


def test_no_call_leaves_a_transaction_open(store: SqliteStore) -> None:
    """Reads run to completion: no hidden read transaction between calls."""
    lease = store.acquire(RUN, "A")
    store.append(RUN, entry(0), lease)
    store.put_meta(meta(RUN, "running"), lease)
    store.transcripts().put(f"{RUN}/b", b"x", lease)
    for read in (
        lambda: store.load(RUN),
        lambda: store.get_meta(RUN),
        lambda: store.list_runs(RunFilter(status="running")),
        lambda: store.transcripts().get(f"{RUN}/b"),
        lambda: store.transcripts().list_refs(RUN),
    ):
        read()
        assert store._conn.txn_state() == 0
    with pytest.raises(LeaseHeldError):
        store.acquire(RUN, "B")
    assert store._conn.txn_state() == 0
