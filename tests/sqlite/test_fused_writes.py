"""SQLite's fused writes: ``put_meta_and_release``, ``put_with_meta``, ``in_brief_lease``.

The LangGraph saver ends a hold with its outcome, starts a thread with its
meta, and makes an unheld write's brief lease through them, each in one
transaction. Each keeps every fence guarantee of the calls it replaces: a
lease that is not live changes nothing, a live lease of another worker refuses
a brief lease, and a write that fails leaves nothing of the others.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance import ManualClock
from rulvar_store import (
    Lease,
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


@pytest.mark.clause("G24", "L15")
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


@pytest.mark.clause("G24", "L15")
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


@pytest.mark.clause("G24", "L15")
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


@pytest.mark.clause("G25", "L14")
def test_a_brief_lease_in_one_transaction_is_refused_while_held(tmp_path: Path) -> None:
    """G25: a live lease of another worker refuses it before the work runs."""
    ran: list[bool] = []
    with open_store(f"sqlite:///{tmp_path / 'f.db'}") as opened:
        store = opened.journal
        assert isinstance(store, SqliteStore)
        held = store.acquire("run", "holder")
        with pytest.raises(LeaseHeldError):
            store.in_brief_lease("run", "brief", lambda lease, j, b: ran.append(True))
        assert ran == []
        state = store.peek_lease("run")
        assert state is not None
        assert (state.owner, state.epoch) == ("holder", held.epoch)


@pytest.mark.clause("G25", "L14")
def test_a_brief_lease_fences_out_earlier_leases_and_leaves_no_row(
    tmp_path: Path,
) -> None:
    """G25: the epoch moves as an acquire's does; one commit; no lease row after."""
    clock = ManualClock()
    with open_store(
        f"sqlite:///{tmp_path / 'f.db'}", ttl_ms=1_000, now=clock
    ) as opened:
        store, blobs = opened.journal, opened.transcripts
        assert isinstance(store, SqliteStore)
        stale = store.acquire("run", "stalled")
        clock.advance(2_000)  # expired, never released: the holder stalled or died
        before = _counted_commits(store)

        def work(lease: Lease, journal: Any, twin: Any) -> int:
            twin.put("run/c/n/x/z", b"brief", lease)
            journal.put_meta(_meta("run", "running"), lease)
            return lease.epoch

        epoch = store.in_brief_lease("run", "brief", work)
        assert _counted_commits(store) == before + 1
        assert epoch == stale.epoch + 1
        assert store.peek_lease("run") is None
        assert blobs.get("run/c/n/x/z") == b"brief"
        with pytest.raises(LeaseHeldError):  # the stalled holder can change nothing
            blobs.put("run/c/n/x/z", b"stale", stale)
        assert blobs.get("run/c/n/x/z") == b"brief"
        assert store.acquire("run", "next").epoch == epoch + 1


@pytest.mark.clause("G25", "L14")
def test_a_brief_lease_is_all_or_nothing(tmp_path: Path) -> None:
    """G25: work that fails after a write, or writes with another lease, leaves nothing."""
    with open_store(f"sqlite:///{tmp_path / 'f.db'}") as opened:
        store, blobs = opened.journal, opened.transcripts
        assert isinstance(store, SqliteStore)

        def fails_after_a_put(lease: Lease, journal: Any, twin: Any) -> None:
            twin.put("run/c/n/x/z", b"lost", lease)
            raise RuntimeError("the work failed")

        with pytest.raises(RuntimeError, match="the work failed"):
            store.in_brief_lease("run", "brief", fails_after_a_put)
        other = Lease("run", "someone-else", 99)

        def writes_with_another_lease(lease: Lease, journal: Any, twin: Any) -> None:
            twin.put("run/c/n/y/z", b"first", lease)
            twin.put("run/c/n/y/z", b"forged", other)

        with pytest.raises(LeaseHeldError):
            store.in_brief_lease("run", "brief", writes_with_another_lease)
        assert blobs.list_refs("run") == []
        assert store.get_meta("run") is None
        assert store.peek_lease("run") is None


@pytest.mark.clause("G25", "L14")
def test_an_unheld_langgraph_put_on_sqlite_is_one_commit(tmp_path: Path) -> None:
    """G25: the saver's unheld put (brief lease, newest read, checkpoint) commits once."""
    from langgraph.checkpoint.base import empty_checkpoint

    from rulvar_langgraph import RulvarSaver

    with RulvarSaver.from_url(f"sqlite:///{tmp_path / 'f.db'}", owner="w") as saver:
        door = saver.journal._door  # type: ignore[attr-defined]  # SQLite's commit counter
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = empty_checkpoint()
            before = door.batches
            stored = saver.put(config, checkpoint, {"step": step}, {})
            assert door.batches == before + 1
            config = {
                "configurable": {**config["configurable"], **stored["configurable"]}
            }
        assert saver.journal.peek_lease("t") is None  # type: ignore[attr-defined]  # SQLite peek
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
