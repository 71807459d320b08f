"""MemoryStore specifics beyond the kit: shared handles, threads, snapshots."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    JournalOrderViolation,
    LeaseHeldError,
    MemoryStore,
    MemoryTranscriptStore,
)


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.mark.clause("X1")
def test_stale_terminal_meta_is_refused_across_two_handles() -> None:
    clock = _Clock()
    a = MemoryStore(ttl_ms=100, now=clock)
    b = MemoryStore.sharing(a)
    lease_a = a.acquire("run", "A")
    a.put_meta({"runId": "run", "status": "running", "segments": 2}, lease_a)
    clock.ms += 150
    lease_b = b.acquire("run", "B")
    b.put_meta({"runId": "run", "status": "running", "segments": 3}, lease_b)
    with pytest.raises(LeaseHeldError):
        a.put_meta({"runId": "run", "status": "cancelled", "segments": 2}, lease_a)
    assert b.get_meta("run") == {"runId": "run", "status": "running", "segments": 3}


@pytest.mark.clause("D9")
def test_bad_ttl_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError):
        MemoryStore(ttl_ms=0)


@pytest.mark.clause("D3")
def test_mutating_inputs_and_outputs_never_changes_history() -> None:
    store = MemoryStore()
    entry: dict[str, Any] = {"seq": 0, "value": {"n": 1}}
    store.append("run", entry)
    entry["value"]["n"] = 2
    loaded = store.load("run")
    loaded[0]["value"]["n"] = 3
    assert store.load("run") == [{"seq": 0, "value": {"n": 1}}]
    blob = bytearray(b"abc")
    store.transcripts().put("run/b", blob)
    blob[0] = ord("x")
    assert store.transcripts().get("run/b") == b"abc"


@pytest.mark.clause("D2")
def test_non_json_entry_persists_nothing() -> None:
    store = MemoryStore()
    with pytest.raises(TypeError):
        store.append("run", {"seq": 0, "value": {1, 2}})
    assert store.load("run") == []


@pytest.mark.clause("D5")
def test_bool_seq_bypasses_the_guard_instead_of_acting_as_one() -> None:
    store = MemoryStore()
    store.append("run", {"seq": 1})
    store.append("run", {"seq": True})
    with pytest.raises(JournalOrderViolation):
        store.append("run", {"seq": 1})
    assert [entry["seq"] for entry in store.load("run")] == [1, True]


@pytest.mark.clause("X7")
def test_eight_threads_share_one_instance_with_complete_journals() -> None:
    store = MemoryStore()
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            lease = store.acquire(f"run-{index}", f"owner-{index}")
            for seq in range(50):
                store.append(f"run-{index}", {"seq": seq}, lease)
                store.renew(lease)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for index in range(8):
        assert [e["seq"] for e in store.load(f"run-{index}")] == list(range(50))


def test_meta_without_run_id_is_a_contract_error() -> None:
    with pytest.raises(ContractError):
        MemoryStore().put_meta({"status": "ok"})


def test_non_bytes_blob_is_a_contract_error() -> None:
    with pytest.raises(ContractError):
        MemoryTranscriptStore().put("run/x", "text")  # type: ignore[arg-type]  # wrong type on purpose
    with pytest.raises(ContractError):
        MemoryStore().transcripts().put("run/x", 3)  # type: ignore[arg-type]  # wrong type on purpose


@pytest.mark.clause("T8")
def test_plain_memory_transcripts_ignore_the_lease() -> None:
    """The single-writer blob store neither declares nor applies a fence."""
    store = MemoryStore()
    lease = store.acquire("run", "A")
    store.release(lease)
    transcripts = MemoryTranscriptStore()
    transcripts.put("run/x", b"1", lease)
    transcripts.delete("run/missing", lease)
    assert transcripts.list_refs("run") == ["run/x"]
