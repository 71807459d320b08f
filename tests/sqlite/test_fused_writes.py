"""SQLite's fused writes (``put_meta_and_release``, ``put_with_meta``): one transaction, fenced whole.

The LangGraph saver ends a hold with its outcome and starts a thread with its
meta through them; both keep every fence guarantee of the two calls they
replace: a lease that is not live changes nothing, and a write that fails
leaves nothing of the other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rulvar_conformance import ManualClock
from rulvar_store import (
    LeaseHeldError,
    LeaseRunMismatchError,
    NotJsonError,
    open_store,
    open_store_async,
)
from rulvar_store_sqlite import SqliteStore


def _meta(run_id: str, status: str) -> dict[str, object]:
    return {"runId": run_id, "status": status, "updatedAt": "t"}


def _counted_commits(store: SqliteStore) -> int:
    return store._door.batches


def test_put_meta_and_release_is_one_transaction_and_frees_the_run(
    tmp_path: Path,
) -> None:
    with open_store(f"sqlite:///{tmp_path / 'f.db'}") as opened:
        store = opened.journal
        assert isinstance(store, SqliteStore)
        lease = store.acquire("run", "w")
        before = _counted_commits(store)
        store.put_meta_and_release(_meta("run", "ok"), lease)
        assert _counted_commits(store) == before + 1
        assert store.get_meta("run") == _meta("run", "ok")
        assert store.peek_lease("run") is None
        assert store.acquire("run", "next").epoch == lease.epoch + 1


def test_a_superseded_lease_changes_nothing_with_either(tmp_path: Path) -> None:
    """Both refused whole once a successor holds the run: meta, blob, lease row unchanged."""
    clock = ManualClock()
    with open_store(
        f"sqlite:///{tmp_path / 'f.db'}", ttl_ms=1_000, now=clock
    ) as opened:
        store, blobs = opened.journal, opened.transcripts
        assert isinstance(store, SqliteStore)
        stale = store.acquire("run", "a")
        store.put_meta(_meta("run", "running"), stale)
        clock.advance(2_000)
        live = store.acquire("run", "b")
        with pytest.raises(LeaseHeldError):
            store.put_meta_and_release(_meta("run", "ok"), stale)
        with pytest.raises(LeaseHeldError):
            store.put_with_meta("run/c/n/x/z", b"late", _meta("run", "error"), stale)
        assert store.get_meta("run") == _meta("run", "running")
        assert blobs.get("run/c/n/x/z") is None
        state = store.peek_lease("run")
        assert state is not None
        assert (state.owner, state.epoch, state.live) == ("b", live.epoch, True)


def test_put_with_meta_lands_both_or_neither(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'f.db'}") as opened:
        store, blobs = opened.journal, opened.transcripts
        assert isinstance(store, SqliteStore)
        lease = store.acquire("run", "w")
        store.put_with_meta("run/c/n/x/z", b"first", _meta("run", "running"), lease)
        assert blobs.get("run/c/n/x/z") == b"first"
        assert store.get_meta("run") == _meta("run", "running")
        # A meta of another run than the lease's: refused before anything is written.
        with pytest.raises(LeaseRunMismatchError):
            store.put_with_meta("run/c/n/y/z", b"b", _meta("other", "x"), lease)
        # A meta that is not JSON: the blob does not land either.
        with pytest.raises(NotJsonError):
            store.put_with_meta(
                "run/c/n/y/z", b"b", {"runId": "run", "status": object()}, lease
            )
        assert blobs.get("run/c/n/y/z") is None
        assert store.get_meta("run") == _meta("run", "running")
        store.release(lease)


def test_the_asyncio_store_offers_both(tmp_path: Path) -> None:
    async def main() -> None:
        async with open_store_async(f"sqlite:///{tmp_path / 'f.db'}") as opened:
            store = opened.journal
            lease = await store.acquire("run", "w")  # type: ignore[attr-defined]  # SQLite leases
            await store.put_with_meta(  # type: ignore[attr-defined]  # SQLite's fused write
                "run/c/n/x/z", b"blob", _meta("run", "running"), lease
            )
            await store.put_meta_and_release(_meta("run", "ok"), lease)  # type: ignore[attr-defined]  # SQLite's fused write
            assert await store.get_meta("run") == _meta("run", "ok")  # type: ignore[attr-defined]  # SQLite get_meta
            assert await opened.transcripts.get("run/c/n/x/z") == b"blob"
            with pytest.raises(LeaseHeldError):
                await store.release(lease)  # type: ignore[attr-defined]  # already released

    asyncio.run(main())
