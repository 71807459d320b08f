"""File stores against the in-memory reference as a model, with crashes and reopens.

Random sequences of appends (some stale), meta writes, deletes, blob writes,
second-handle appends, torn tails left by a "crash" and store reopens must
always leave the file stores agreeing with ``MemoryStore`` and
``MemoryTranscriptStore``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rulvar_store import (
    FileTranscriptStore,
    JournalOrderViolation,
    JsonlFileStore,
    MemoryStore,
    MemoryTranscriptStore,
    RunFilter,
)

RUNS = st.sampled_from(["r1", "r2"])
# No ref is a prefix folder of another, so every put is legal on both stores.
REFS = st.sampled_from(["r1", "r1/t0", "r1/ckpt/1", "r1/ckpt/2", "r2/t0"])
SEQS = st.one_of(st.none(), st.integers(-1, 12), st.floats(-1, 12, allow_nan=False))


class FileStoresMatchTheModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="rulvar-file-model-"))
        self.store = JsonlFileStore(self.root)
        self.blobs = FileTranscriptStore(self.root)
        self.model = MemoryStore()
        self.model_blobs = MemoryTranscriptStore()
        self.counter = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _append(self, store: JsonlFileStore, run_id: str, seq: float | None) -> None:
        self.counter += 1
        entry: dict[str, Any] = {"kind": "step", "n": self.counter}
        if seq is not None:
            entry["seq"] = seq
        expected = _outcome(lambda: self.model.append(run_id, entry))
        assert _outcome(lambda: store.append(run_id, entry)) == expected

    @rule(run_id=RUNS, seq=SEQS)
    def append(self, run_id: str, seq: float | None) -> None:
        self._append(self.store, run_id, seq)

    @rule(run_id=RUNS, seq=SEQS)
    def append_through_another_handle(self, run_id: str, seq: float | None) -> None:
        self._append(JsonlFileStore(self.root), run_id, seq)

    @rule(run_id=RUNS, status=st.sampled_from(["running", "ok", "suspended"]))
    def put_meta(self, run_id: str, status: str) -> None:
        meta = {"runId": run_id, "status": status, "updatedAt": str(self.counter)}
        self.model.put_meta(meta)
        self.store.put_meta(meta)

    @rule(run_id=RUNS)
    def delete(self, run_id: str) -> None:
        self.model.delete(run_id)
        self.store.delete(run_id)

    @rule(ref=REFS, data=st.binary(max_size=64))
    def put_blob(self, ref: str, data: bytes) -> None:
        self.model_blobs.put(ref, data)
        self.blobs.put(ref, data)

    @rule(ref=REFS)
    def delete_blob(self, ref: str) -> None:
        self.model_blobs.delete(ref)
        self.blobs.delete(ref)

    @rule(run_id=RUNS, tail=st.binary(min_size=1, max_size=24))
    def crash_mid_append(self, run_id: str, tail: bytes) -> None:
        """Leave the bytes of an append that never returned: no newline."""
        journal = self.root / run_id / "journal.jsonl"
        if journal.exists():
            with journal.open("ab") as file:
                file.write(tail.replace(b"\n", b" "))

    @rule(run_id=RUNS, tail=st.binary(min_size=1, max_size=24), seq=SEQS)
    def crash_then_append(self, run_id: str, tail: bytes, seq: float | None) -> None:
        """The next append repairs the torn tail first, never gluing lines."""
        self.crash_mid_append(run_id, tail)
        self._append(self.store, run_id, seq)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = JsonlFileStore(self.root)
        self.blobs = FileTranscriptStore(self.root)

    @invariant()
    def journals_metas_and_blobs_agree(self) -> None:
        for run_id in ("r1", "r2"):
            assert self.store.load(run_id) == self.model.load(run_id)
            assert self.store.get_meta(run_id) == self.model.get_meta(run_id)
            assert self.blobs.list_refs(run_id) == self.model_blobs.list_refs(run_id)
        for ref in ("r1", "r1/t0", "r1/ckpt/1", "r2/t0"):
            assert self.blobs.get(ref) == self.model_blobs.get(ref)
        assert self.store.list_runs() == self.model.list_runs()
        running = RunFilter(statuses=["running"])
        assert self.store.list_runs(running) == self.model.list_runs(running)


def _outcome(call: Callable[[], None]) -> str:
    try:
        call()
    except JournalOrderViolation:
        return "violation"
    return "ok"


FileStoresMatchTheModel.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, database=None, deadline=None
)
TestFileStoresMatchTheModel = pytest.mark.clause("J6")(FileStoresMatchTheModel.TestCase)
