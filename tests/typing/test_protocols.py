"""Each store satisfies its protocols, statically (mypy) and at run time."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_store import (
    BatchTranscriptStore,
    FileTranscriptStore,
    JournalStore,
    JsonlFileStore,
    LeasableStore,
    MemoryStore,
    MemoryTranscriptStore,
    MetaLookupStore,
    TranscriptStore,
    has_batch_put,
)
from rulvar_store.backend import LastRefTranscriptStore, has_last_ref
from rulvar_store_postgres import PostgresFencedTranscriptStore, PostgresStore
from rulvar_store_sqlite import SqliteStore


def test_memory_stores_satisfy_their_protocols() -> None:
    store = MemoryStore()
    journal: JournalStore = store
    leasable: LeasableStore = store
    lookup: MetaLookupStore = store
    twin: TranscriptStore = store.transcripts()
    plain: TranscriptStore = MemoryTranscriptStore()
    for value, protocol in [
        (journal, JournalStore),
        (leasable, LeasableStore),
        (lookup, MetaLookupStore),
        (twin, TranscriptStore),
        (plain, TranscriptStore),
    ]:
        assert isinstance(value, protocol)


def test_file_stores_satisfy_their_protocols(tmp_path: Path) -> None:
    journal: MetaLookupStore = JsonlFileStore(tmp_path)
    blobs: TranscriptStore = FileTranscriptStore(tmp_path)
    assert isinstance(journal, MetaLookupStore)
    assert isinstance(blobs, TranscriptStore)


def test_sqlite_stores_satisfy_their_protocols() -> None:
    with SqliteStore(":memory:") as store:
        leasable: LeasableStore = store
        lookup: MetaLookupStore = store
        twin: TranscriptStore = store.transcripts()
        assert isinstance(leasable, LeasableStore)
        assert isinstance(lookup, MetaLookupStore)
        assert isinstance(twin, TranscriptStore)


def _postgres_pair(url: str) -> tuple[LeasableStore, MetaLookupStore, TranscriptStore]:
    """Checked by mypy only: PostgresStore stands where the protocols are expected."""
    store = PostgresStore(url)
    return store, store, store.transcripts()


def test_postgres_store_class_has_the_protocol_methods() -> None:
    for name in (
        "append",
        "load",
        "put_meta",
        "list_runs",
        "delete",
        "get_meta",
        "acquire",
        "renew",
        "release",
        "transcripts",
        "close",
    ):
        assert callable(getattr(PostgresStore, name))
    assert callable(_postgres_pair)


def _in_process_blob_stores(tmp_path: Path, sqlite: SqliteStore) -> list[object]:
    """The package's blob stores that need no server, for the run-time checks."""
    return [
        MemoryStore().transcripts(),
        MemoryTranscriptStore(),
        FileTranscriptStore(tmp_path),
        sqlite.transcripts(),
    ]


def _batch_stores(
    tmp_path: Path, sqlite: SqliteStore, postgres: PostgresStore
) -> list[BatchTranscriptStore]:
    """Checked by mypy: every blob store of the package offers put_many (T11)."""
    return [
        MemoryStore().transcripts(),
        MemoryTranscriptStore(),
        FileTranscriptStore(tmp_path),
        sqlite.transcripts(),
        postgres.transcripts(),
    ]


@pytest.mark.clause("T11")
def test_every_blob_store_is_a_batch_store(tmp_path: Path) -> None:
    """At run time too: the in-process ones pass the protocol and has_batch_put."""
    with SqliteStore(":memory:") as sqlite:
        for store in _in_process_blob_stores(tmp_path, sqlite):
            assert isinstance(store, BatchTranscriptStore)
            assert has_batch_put(store)
    assert callable(PostgresFencedTranscriptStore.put_many)
    assert callable(_batch_stores)


def _last_ref_stores(
    tmp_path: Path, sqlite: SqliteStore, postgres: PostgresStore
) -> list[LastRefTranscriptStore]:
    """Checked by mypy: every blob store of the package offers last_ref (T12)."""
    return [
        MemoryStore().transcripts(),
        MemoryTranscriptStore(),
        FileTranscriptStore(tmp_path),
        sqlite.transcripts(),
        postgres.transcripts(),
    ]


@pytest.mark.clause("T12")
def test_every_blob_store_answers_last_ref(tmp_path: Path) -> None:
    """At run time too: the in-process ones pass the protocol and has_last_ref."""
    with SqliteStore(":memory:") as sqlite:
        for store in _in_process_blob_stores(tmp_path, sqlite):
            assert isinstance(store, LastRefTranscriptStore)
            assert has_last_ref(store)
    assert callable(PostgresFencedTranscriptStore.last_ref)
    assert callable(_last_ref_stores)
