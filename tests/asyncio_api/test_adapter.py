"""open_store_async and the generic adapter on every built-in backend."""

from __future__ import annotations

import asyncio

import pytest

from rulvar_store import (
    AsyncIncrementalReadStore,
    AsyncJournalStore,
    AsyncLeasableStore,
    AsyncMetaLookupStore,
    AsyncTranscriptStore,
    ConfigError,
    JournalOrderViolation,
    LeaseHeldError,
    MemoryStore,
    StoreClosedError,
    has_fenced_writes,
    is_async_store,
    open_store_async,
)


class _SyncLookalike:
    """Every name of the async journal protocol, all plain ``def``."""

    def append(self, run_id: str, entry: object, lease: object = None) -> None: ...
    def load(self, run_id: str) -> list[object]:
        return []

    def put_meta(self, meta: object, lease: object = None) -> None: ...
    def list_runs(self, run_filter: object = None) -> list[object]:
        return []

    def delete(self, run_id: str, lease: object = None) -> None: ...
    def aclose(self) -> None: ...
    def __aenter__(self) -> None: ...
    def __aexit__(self, *exc_info: object) -> None: ...


def test_a_sync_store_is_not_async_though_its_method_names_match() -> None:
    """Protocols check names only; the marker tells a coroutine API apart."""
    store: object = _SyncLookalike()
    assert isinstance(store, AsyncJournalStore)
    assert not is_async_store(store)
    assert not is_async_store(MemoryStore())


def test_the_adapter_round_trips_every_call(store_url: str) -> None:
    async def scenario() -> None:
        async with open_store_async(store_url) as opened:
            journal, blobs = opened.journal, opened.transcripts
            assert is_async_store(journal)
            assert is_async_store(blobs)
            assert isinstance(blobs, AsyncTranscriptStore)
            lease = None
            if isinstance(journal, AsyncLeasableStore):
                lease = await journal.acquire("run-a", "worker-1")
                await journal.renew(lease)
            await journal.append("run-a", {"seq": 1, "kind": "step"}, lease)
            await journal.append("run-a", {"seq": 2, "kind": "step"}, lease)
            assert [e["seq"] for e in await journal.load("run-a")] == [1, 2]
            meta = {"runId": "run-a", "status": "running"}
            await journal.put_meta(meta, lease)
            assert [m["runId"] for m in await journal.list_runs()] == ["run-a"]
            if isinstance(journal, AsyncMetaLookupStore):
                assert await journal.get_meta("run-a") == meta
            if isinstance(journal, AsyncIncrementalReadStore):
                tail = await journal.load_since("run-a")
                assert [e["seq"] for e in tail.entries] == [1, 2]
                again = await journal.load_since("run-a", tail.cursor)
                assert again.entries == []
            await blobs.put("run-a/out", b"bytes", lease)
            assert await blobs.get("run-a/out") == b"bytes"
            assert await blobs.list_refs("run-a") == ["run-a/out"]
            await blobs.delete("run-a/out", lease)
            assert await blobs.get("run-a/out") is None
            if lease is not None:
                assert isinstance(journal, AsyncLeasableStore)
                await journal.release(lease)
            await journal.delete("run-a")
            assert await journal.load("run-a") == []

    asyncio.run(scenario())


def test_awaiting_the_open_hands_the_store_over(store_url: str) -> None:
    async def scenario() -> None:
        opened = await open_store_async(store_url)
        try:
            await opened.journal.append("run-b", {"seq": 1})
            assert len(await opened.journal.load("run-b")) == 1
        finally:
            await opened.aclose()
        await opened.aclose()  # idempotent
        with pytest.raises(StoreClosedError):
            await opened.journal.load("run-b")
        with pytest.raises(StoreClosedError):
            await opened.transcripts.get("run-b/x")

    asyncio.run(scenario())


def test_typed_errors_cross_the_hop_unchanged(store_url: str) -> None:
    async def scenario() -> None:
        async with open_store_async(store_url) as opened:
            journal = opened.journal
            await journal.append("run-c", {"seq": 5})
            with pytest.raises(JournalOrderViolation):
                await journal.append("run-c", {"seq": 5})
            if isinstance(journal, AsyncLeasableStore):
                first = await journal.acquire("run-d", "one")
                await journal.release(first)
                await journal.acquire("run-d", "two")
                with pytest.raises(LeaseHeldError):
                    await journal.append("run-d", {"seq": 1}, first)

    asyncio.run(scenario())


def test_the_adapter_keeps_the_sync_stores_fencing_marker(store_url: str) -> None:
    async def scenario() -> tuple[bool, bool]:
        async with open_store_async(store_url) as opened:
            return has_fenced_writes(opened.journal), has_fenced_writes(
                opened.transcripts
            )

    fenced = asyncio.run(scenario())
    assert fenced == ((False, False) if store_url.startswith("file:") else (True, True))


def test_a_bad_url_raises_config_error_when_awaited() -> None:
    opening = open_store_async("nosuch://x")  # nothing happens until awaited
    with pytest.raises(ConfigError):
        asyncio.run(_await(opening))
    with pytest.raises(ConfigError):
        asyncio.run(_await(open_store_async("memory://", bogus=1)))


async def _await(opening: object) -> None:
    opened = await opening  # type: ignore[misc]  # any awaitable opening
    await opened.aclose()
