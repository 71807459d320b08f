"""A store author's location travels to a spawned child: dill ships the closure.

Kill-point and soak children open the location the parent made. A store author
writes the opener as a plain closure (over a path, a DSN), which the standard
pickle refuses; ``multiprocess`` (spawn context) pickles with dill, which
serializes it by value. Here the child opens such a location, writes under a
lease, and the parent sees the write through its own handle.
"""

from __future__ import annotations

from pathlib import Path

import multiprocess
import pytest

from rulvar_store import Clock, OpenedStore
from rulvar_store.backend import StoreLocation


def _closure_location(path: str) -> StoreLocation:
    def opener(ttl_ms: int | None, now: Clock | None, fail_fast: bool) -> OpenedStore:
        # Imported inside: the child rebuilds this function from its code alone.
        from rulvar_store import OpenedStore
        from rulvar_store_sqlite import SqliteStore

        store = SqliteStore(path, ttl_ms=ttl_ms or 60_000, now=now)
        return OpenedStore(store, store.transcripts(), (store.close,))

    return StoreLocation(name=path, opener=opener, contention=True)


def _write_in_child(location: StoreLocation) -> int:
    """Runs in the spawned child: open, take the lease, append, put a blob."""
    with location.open() as opened:
        journal = opened.journal
        lease = journal.acquire("shipped", "child")  # type: ignore[attr-defined]
        journal.append("shipped", {"seq": 1, "by": "child"}, lease)
        opened.transcripts.put("shipped/ckpt/1", b"from the child", lease)
        journal.release(lease)  # type: ignore[attr-defined]
        return int(lease.epoch)


@pytest.mark.clause("C1")
def test_closure_location_opens_and_writes_in_a_spawned_child(tmp_path: Path) -> None:
    """The child's leased append and blob are visible through the parent's handle."""
    location = _closure_location(str(tmp_path / "shipped.db"))
    context = multiprocess.get_context("spawn")
    with context.Pool(1) as pool:
        epoch = pool.apply(_write_in_child, (location,))
    assert epoch >= 1
    with location.open() as parent:
        assert parent.journal.load("shipped") == [{"seq": 1, "by": "child"}]
        assert parent.transcripts.get("shipped/ckpt/1") == b"from the child"
        later = parent.journal.acquire("shipped", "parent")  # type: ignore[attr-defined]
        assert later.epoch > epoch
