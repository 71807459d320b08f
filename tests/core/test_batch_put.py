"""put_many on every blob store of the package, sync and asyncio (T11).

The fenced stores' batch rules are the kit's checks (fenced-transcripts,
two-handles); here: the asyncio twins, the single-writer stores, the adapter's
declaration, and the file store's documented per-blob atomicity.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import (
    ContractError,
    FileTranscriptStore,
    InvalidArgumentError,
    LeaseHeldError,
    MemoryTranscriptStore,
    has_batch_put,
    open_store,
)
from rulvar_store.backend import adapt_opened
from tests._async_openers import AsyncOpener, async_store_params

ASYNC_STORES = async_store_params("lgput_batch")


@pytest.mark.clause("T11")
@pytest.mark.parametrize("open_async", ASYNC_STORES)
def test_async_put_many_is_all_or_nothing_and_fenced(
    open_async: AsyncOpener, tmp_path: Path
) -> None:
    """The asyncio twins: a batch lands whole; a stale or bad one changes nothing."""

    async def scenario() -> None:
        async with open_async(tmp_path) as opened:
            blobs, journal = opened.transcripts, opened.journal
            assert has_batch_put(blobs)
            put_many: Any = getattr(blobs, "put_many")  # noqa: B009  # has_batch_put said so
            first: Any = await journal.acquire("run", "a")  # type: ignore[attr-defined]  # leasable
            await put_many([("run/a", b"1"), ("run/b", b"1")], first)
            await journal.release(first)  # type: ignore[attr-defined]  # leasable
            second: Any = await journal.acquire("run", "b")  # type: ignore[attr-defined]  # leasable
            with pytest.raises(LeaseHeldError):
                await put_many([("run/a", b"2"), ("run/c", b"2")], first)
            with pytest.raises(InvalidArgumentError):
                await put_many([("run/a", b"3"), ("run/c", "not bytes")], second)
            with pytest.raises(InvalidArgumentError):
                await put_many([("run/a", b"3"), ("run/a", b"4")], second)
            await put_many([], second)
            assert [await blobs.get(ref) for ref in ("run/a", "run/b", "run/c")] == [
                b"1",
                b"1",
                None,
            ]
            await put_many([("run/a", b"5"), ("run/c", b"5")], second)
            assert await blobs.get("run/c") == b"5"

    asyncio.run(scenario())


@pytest.mark.clause("T11")
@pytest.mark.clause("T8")
def test_single_writer_memory_blobs_take_a_batch_and_only_type_check_the_lease() -> (
    None
):
    """The unfenced memory store: the batch lands; a bad item stops it before any write."""
    blobs = MemoryTranscriptStore()
    blobs.put_many([("run/a", b"1"), ("run/b", b"2")])
    with pytest.raises(InvalidArgumentError):
        blobs.put_many([("run/c", b"3"), ("run/d", 4)])  # type: ignore[list-item]  # wrong on purpose
    assert blobs.list_refs("run") == ["run/a", "run/b"]


@pytest.mark.clause("T11")
@pytest.mark.clause("T8")
def test_file_blobs_check_every_item_before_the_first_write(tmp_path: Path) -> None:
    """A bad or unsafe ref late in the batch writes nothing (checked up front)."""
    with FileTranscriptStore(tmp_path) as blobs:
        assert has_batch_put(blobs)
        with pytest.raises(InvalidArgumentError):
            blobs.put_many([("run/a", b"1"), ("run/a", b"2")])
        with pytest.raises(ContractError):
            blobs.put_many([("run/a", b"1"), ("run/..", b"2")])
        assert blobs.list_refs("run") == []
        blobs.put_many([("run/a", b"1"), ("run/b/c", b"2")])
        assert blobs.list_refs("run") == ["run/a", "run/b/c"]


@pytest.mark.clause("T11")
def test_file_blobs_are_atomic_per_blob_only(tmp_path: Path) -> None:
    """As documented: a collision mid-batch leaves the blobs before it written."""
    with FileTranscriptStore(tmp_path) as blobs:
        blobs.put("run/x", b"0")
        with pytest.raises(ContractError):
            blobs.put_many([("run/a", b"1"), ("run/x/y", b"2")])
        assert blobs.get("run/a") == b"1"


@pytest.mark.clause("T11")
def test_the_adapter_offers_put_many_only_over_a_store_that_has_it(
    tmp_path: Path,
) -> None:
    """has_batch_put is the declaration: an adapter must not claim what it cannot do."""

    class Plain:
        """A complete blob store without put_many."""

        def __init__(self) -> None:
            self._inner = MemoryTranscriptStore()
            self.put = self._inner.put
            self.get = self._inner.get
            self.list_refs = self._inner.list_refs
            self.delete = self._inner.delete

        def close(self) -> None:
            self._inner.close()

    async def scenario() -> tuple[bool, bool]:
        with_batch = adapt_opened(open_store("memory://"))
        plain = open_store("memory://")
        without = adapt_opened(type(plain)(plain.journal, Plain(), plain.closers))
        try:
            return has_batch_put(with_batch.transcripts), has_batch_put(
                without.transcripts
            )
        finally:
            await with_batch.aclose()
            await without.aclose()

    assert asyncio.run(scenario()) == (True, False)
