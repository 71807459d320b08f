"""Each store satisfies its protocols, statically (mypy) and at run time."""

from __future__ import annotations

from rulvar_store import (
    JournalStore,
    LeasableStore,
    MemoryStore,
    MemoryTranscriptStore,
    MetaLookupStore,
    TranscriptStore,
)


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
