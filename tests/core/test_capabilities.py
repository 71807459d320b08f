"""Capability markers are declared, never inferred (F5, X5, M5)."""

from __future__ import annotations

from typing import Any

import pytest

from rulvar_store import (
    ConfigError,
    MemoryStore,
    MemoryTranscriptStore,
    RunFilter,
    assert_fenced_writes,
    has_fenced_writes,
    has_meta_lookup,
    read_run_meta,
)


class _TruthyMarker:
    fenced_writes = 1  # truthy but not True: still no declaration


class _ListOnlyStore:
    """A journal store without get_meta, for the list_runs fallback."""

    def __init__(self) -> None:
        self.metas = [
            {"runId": "a", "status": "ok"},
            {"runId": "b", "status": "running"},
        ]

    def list_runs(self, run_filter: RunFilter | None = None) -> list[dict[str, Any]]:
        return list(self.metas)


@pytest.mark.clause("F5")
def test_has_fenced_writes_requires_the_marker_to_be_true() -> None:
    assert has_fenced_writes(MemoryStore())
    assert has_fenced_writes(MemoryStore().transcripts())
    assert not has_fenced_writes(_TruthyMarker())
    assert not has_fenced_writes(MemoryTranscriptStore())
    assert not has_fenced_writes(object())


@pytest.mark.clause("X5")
def test_assert_fenced_writes_names_each_undeclared_store() -> None:
    with pytest.raises(ConfigError, match="transcripts \\(MemoryTranscriptStore\\)"):
        assert_fenced_writes(MemoryStore(), MemoryTranscriptStore())
    with pytest.raises(ConfigError, match="journal \\(_TruthyMarker\\)"):
        assert_fenced_writes(_TruthyMarker())


@pytest.mark.clause("X5")
def test_assert_fenced_writes_passes_for_a_fenced_pair() -> None:
    store = MemoryStore()
    assert_fenced_writes(store, store.transcripts())


@pytest.mark.clause("M5")
def test_read_run_meta_uses_get_meta_when_present() -> None:
    store = MemoryStore()
    store.put_meta({"runId": "r", "status": "ok", "updatedAt": "t"})
    assert has_meta_lookup(store)
    assert read_run_meta(store, "r") == {"runId": "r", "status": "ok", "updatedAt": "t"}
    assert read_run_meta(store, "missing") is None


@pytest.mark.clause("M5")
def test_read_run_meta_scans_list_runs_without_get_meta() -> None:
    store = _ListOnlyStore()
    assert not has_meta_lookup(store)
    assert read_run_meta(store, "b") == {"runId": "b", "status": "running"}  # type: ignore[arg-type]  # a partial store on purpose
    assert read_run_meta(store, "c") is None  # type: ignore[arg-type]  # a partial store on purpose
