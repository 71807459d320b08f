"""The soak referee on histories it can judge by hand, and the writer in-process (S9, S12, C4)."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import pytest

from rulvar_conformance.soak import (
    ListSink,
    SoakHooks,
    SoakWriterConfig,
    referee_history,
    run_soak_writer,
    verify_soak_history,
)
from rulvar_store import Lease, MemoryStore, StoreBusyError

RUN = "soak-run-0"
RUNS = (RUN,)


def ev(t: str, w: int, ns: int, **fields: Any) -> dict[str, Any]:
    return {"t": t, "w": w, "inc": 0, "ns": ns, **fields}


def entry(nonce: str, seq: int, epoch: int) -> dict[str, Any]:
    return {"seq": seq, "value": {"soak": {"nonce": nonce, "epoch": epoch}}}


def marker(
    w: int, ns: int, epoch: int, nonce: str, seq: int, counter: int = 0
) -> list[dict[str, Any]]:
    op_id = f"w{w}.0-{ns}"
    fields = {
        "run": RUN,
        "epoch": epoch,
        "nonce": nonce,
        "seq": seq,
        "counter": counter,
    }
    return [
        ev("invoke", w, ns, id=op_id, op="append", **fields),
        ev(
            "accept",
            w,
            ns + 1,
            id=op_id,
            surface="marker" if counter == 0 else "append",
            **fields,
        ),
    ]


def two_tenures() -> list[dict[str, Any]]:
    """w0 holds epoch 1 and appends one marker; w1 takes over with epoch 2 and appends one."""
    return [
        ev("grant", 0, 10, id="w0.0-1", run=RUN, epoch=1),
        *marker(0, 20, 1, "n1", 1),
        ev("grant", 1, 40, id="w1.0-1", run=RUN, epoch=2),
        *marker(1, 50, 2, "n2", 2),
    ]


def store_with(*entries: dict[str, Any]) -> MemoryStore:
    store = MemoryStore()
    for item in entries:
        store.append(RUN, item)
    return store


def judge(store: MemoryStore, events: list[dict[str, Any]]) -> list[str]:
    return verify_soak_history(store, store.transcripts(), events, RUNS)


@pytest.mark.clause("S9")
def test_a_history_the_store_matches_has_no_violation() -> None:
    """Two tenures whose accepted markers are exactly the stored journal pass."""
    store = store_with(entry("n1", 1, 1), entry("n2", 2, 2))
    assert judge(store, two_tenures()) == []


@pytest.mark.clause("C4")
def test_an_epoch_granted_twice_is_a_double_grant() -> None:
    """A tampered history granting epoch 1 to two writers is reported as DOUBLE GRANT."""
    events = [*two_tenures(), ev("grant", 1, 60, id="w1.0-9", run=RUN, epoch=1)]
    store = store_with(entry("n1", 1, 1), entry("n2", 2, 2))
    assert any(v.startswith("DOUBLE GRANT") for v in judge(store, events))


@pytest.mark.clause("C4")
def test_an_accept_under_another_writers_epoch_is_reported() -> None:
    """w1 claiming an append under w0's epoch 1 is ACCEPT UNDER ANOTHER WRITER'S EPOCH."""
    events = two_tenures()
    events[-1] = {**events[-1], "epoch": 1, "counter": 5}
    store = store_with(entry("n1", 1, 1), entry("n2", 2, 2))
    assert any("ANOTHER WRITER'S EPOCH" in v for v in judge(store, events))


@pytest.mark.clause("C4")
def test_an_accepted_append_missing_from_the_journal_is_a_lost_write() -> None:
    """The store lost w1's accepted marker: LOST WRITE names its nonce."""
    store = store_with(entry("n1", 1, 1))
    violations = judge(store, two_tenures())
    assert any(v.startswith("LOST WRITE") and "n2" in v for v in violations), violations


@pytest.mark.clause("S9")
def test_an_entry_no_accept_explains_is_unexpected() -> None:
    """A stale writer's entry that got in shows as UNEXPECTED ENTRY."""
    store = store_with(entry("n1", 1, 1), entry("stale-x", 2, 1), entry("n2", 3, 2))
    violations = judge(store, two_tenures())
    assert any(v.startswith("UNEXPECTED ENTRY") and "stale-x" in v for v in violations)


@pytest.mark.clause("S9")
def test_an_append_invoked_after_a_higher_grant_cannot_be_accepted() -> None:
    """w0 invoked under epoch 1 after epoch 2 was granted: STALE ACCEPT in real time."""
    events = [
        ev("grant", 0, 10, id="w0.0-1", run=RUN, epoch=1),
        ev("grant", 1, 40, id="w1.0-1", run=RUN, epoch=2),
        *marker(0, 50, 1, "n1", 1),
    ]
    store = store_with(entry("n1", 1, 1))
    assert any("was invoked after epoch 2" in v for v in judge(store, events))


@pytest.mark.clause("S9")
@pytest.mark.parametrize("committed", [True, False])
def test_an_unknown_outcome_append_resolves_from_the_store(committed: bool) -> None:
    """A killed writer's last append may or may not be in the journal; neither is a violation."""
    events = [
        *two_tenures()[:3],
        ev(
            "invoke",
            0,
            30,
            id="w0.0-9",
            op="append",
            run=RUN,
            epoch=1,
            nonce="n1b",
            seq=2,
            counter=1,
        ),
    ]
    stored = (
        [entry("n1", 1, 1), entry("n1b", 2, 1)] if committed else [entry("n1", 1, 1)]
    )
    store = store_with(*stored)
    verdict = referee_history(store, store.transcripts(), events, RUNS)
    assert verdict.violations == []
    assert verdict.unknown == [
        {
            "id": "w0.0-9",
            "op": "append",
            "run": RUN,
            "resolved": "committed" if committed else "not committed",
        }
    ]


@pytest.mark.clause("S9")
def test_a_blob_left_by_a_refused_put_is_reported() -> None:
    """A blob no accepted put explains is UNEXPECTED BLOB; soak-other must stay empty."""
    store = store_with(entry("n1", 1, 1), entry("n2", 2, 2))
    store.transcripts().put(f"{RUN}/blob-0", b'{"soak":{"nonce":"stale-1"}}')
    store.transcripts().put("soak-other/blob", b"x")
    violations = judge(store, two_tenures())
    assert any(v.startswith("UNEXPECTED BLOB") for v in violations)
    assert any(v.startswith("CROSS-RUN WRITE") for v in violations)


# -- the writer in-process over fakes (S12) ------------------------------------------


class NoHolderCheck:
    """A broken store: every leased write ignores the lease (no holder check)."""

    fenced_writes = True

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.lease_ttl_ms = inner.lease_ttl_ms

    def acquire(self, run_id: str, owner: str) -> Lease:
        return self.inner.acquire(run_id, owner)

    def append(self, run_id: str, item: Any, lease: Lease | None = None) -> None:
        self.inner.append(run_id, item)

    def put_meta(self, meta: Any, lease: Lease | None = None) -> None:
        self.inner.put_meta(meta)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self.inner.delete(run_id)

    def renew(self, lease: Lease) -> None:
        """Never refuses."""

    def release(self, lease: Lease) -> None:
        """Never refuses."""

    def load(self, run_id: str) -> list[Any]:
        return self.inner.load(run_id)

    def get_meta(self, run_id: str) -> Any:
        return self.inner.get_meta(run_id)


class UnfencedBlobs:
    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner.transcripts()

    def put(self, ref: str, blob: bytes, lease: Lease | None = None) -> None:
        self.inner.put(ref, blob)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self.inner.delete(ref)

    def get(self, ref: str) -> bytes | None:
        return self.inner.get(ref)

    def list_refs(self, run_id: str) -> list[str]:
        return self.inner.list_refs(run_id)


def storm_in_process(
    broken: bool, writers: int = 3, seconds: float = 0.6
) -> tuple[MemoryStore, list[dict[str, Any]]]:
    """Writers in threads over one memory domain, ttl 20 ms, for ``seconds``."""
    base = MemoryStore(ttl_ms=20)
    deadline = time.monotonic() + seconds
    sinks = [ListSink() for _ in range(writers)]

    def one(index: int) -> None:
        handle = MemoryStore.sharing(base)
        journal: Any = NoHolderCheck(handle) if broken else handle
        blobs: Any = UnfencedBlobs(handle) if broken else handle.transcripts()
        config = SoakWriterConfig(
            writer=index,
            incarnation=0,
            seed=7,
            ttl_ms=20,
            runs=("soak-run-0", "soak-run-1"),
        )
        run_soak_writer(
            journal,
            blobs,
            config,
            sinks[index],
            SoakHooks(stop=lambda: time.monotonic() > deadline),
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return base, [e for sink in sinks for e in sink.events]


@pytest.mark.clause("S12")
def test_the_writer_over_an_honest_fake_gives_zero_violations() -> None:
    """In-process writers over the fenced memory store: real takeovers, stale probes, no violation."""
    store, events = storm_in_process(broken=False)
    kinds = [e["t"] for e in events]
    assert kinds.count("grant") >= 4
    assert kinds.count("stale-reject") >= 16
    assert "accept" in kinds
    assert (
        verify_soak_history(
            store, store.transcripts(), events, ("soak-run-0", "soak-run-1")
        )
        == []
    )


@pytest.mark.clause("C4")
def test_the_writer_over_a_fake_without_holder_check_reports_stale_accept() -> None:
    """A store that ignores leases lets the stale sweep through: STALE ACCEPT."""
    store, events = storm_in_process(broken=True, writers=2, seconds=0.3)
    violations = verify_soak_history(
        store, store.transcripts(), events, ("soak-run-0", "soak-run-1")
    )
    assert any(v.startswith("STALE ACCEPT") for v in violations)


@pytest.mark.clause("C4")
def test_tampering_with_an_honest_history_is_caught() -> None:
    """Double grant, a foreign-epoch accept and a lost write injected into a real history."""
    store, events = storm_in_process(broken=False, writers=2, seconds=0.3)
    runs = ("soak-run-0", "soak-run-1")
    grants = [e for e in events if e["t"] == "grant"]
    doubled = [*events, {**grants[0], "w": 99, "ns": grants[0]["ns"] + 1}]
    foreign = copy.deepcopy(events)
    victim = next(e for e in foreign if e["t"] == "accept")
    victim["w"] = 98
    newest = max(grants, key=lambda e: (e["run"] == runs[0], e["epoch"]))
    forged = {
        "t": "accept",
        "w": newest["w"],
        "inc": 0,
        "ns": newest["ns"] + 1,
        "id": "forged",
        "surface": "append",
        "run": newest["run"],
        "epoch": newest["epoch"],
        "counter": 10_000,
        "nonce": "never-stored",
        "seq": 10_000,
    }
    lost = [*events, forged]
    assert any(
        v.startswith("DOUBLE GRANT")
        for v in verify_soak_history(store, store.transcripts(), doubled, runs)
    )
    assert any(
        "ANOTHER WRITER'S EPOCH" in v
        for v in verify_soak_history(store, store.transcripts(), foreign, runs)
    )
    assert any(
        v.startswith("LOST WRITE")
        for v in verify_soak_history(store, store.transcripts(), lost, runs)
    )


class BusyOnce:
    """The honest store, except that the first append raises StoreBusyError."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.busy_left = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, run_id: str, item: Any, lease: Lease | None = None) -> None:
        if self.busy_left:
            self.busy_left -= 1
            raise StoreBusyError("busy", "append")
        self.inner.append(run_id, item, lease)


def one_writer(journal: Any, store: MemoryStore, tenures: int) -> list[dict[str, Any]]:
    """One in-process writer for ``tenures`` grants, ttl 20 ms."""
    sink = ListSink()
    config = SoakWriterConfig(writer=0, incarnation=0, seed=3, ttl_ms=20, runs=RUNS)

    def stop() -> bool:
        return sum(1 for e in sink.events if e["t"] == "grant") >= tenures

    run_soak_writer(journal, store.transcripts(), config, sink, SoakHooks(stop=stop))
    return sink.events


@pytest.mark.clause("S2")
def test_a_busy_store_call_is_logged_and_retried() -> None:
    """StoreBusyError is a busy record and a retry of the same call, which then lands."""
    store = MemoryStore(ttl_ms=20)
    events = one_writer(BusyOnce(store), store, tenures=1)
    busy = [e for e in events if e["t"] == "busy"]
    assert len(busy) == 1
    assert any(e["t"] == "accept" and e["id"] == busy[0]["id"] for e in events)
    assert verify_soak_history(store, store.transcripts(), events, RUNS) == []


@pytest.mark.clause("S4")
@pytest.mark.clause("S6")
def test_every_tenure_ends_with_a_sweep_over_every_surface_and_the_writer_says_done() -> (
    None
):
    """The dead lease is tried on all eight surfaces, each refused; the log ends with done."""
    store = MemoryStore(ttl_ms=20)
    events = one_writer(store, store, tenures=3)
    surfaces = {e["surface"] for e in events if e["t"] == "stale-reject"}
    assert surfaces == {
        "append",
        "meta",
        "blob-put",
        "blob-delete",
        "delete",
        "renew",
        "cross-run",
        "release",
    }
    assert events[-1]["t"] == "done"
    assert events[0]["owner"] == "soak-w0.0"
