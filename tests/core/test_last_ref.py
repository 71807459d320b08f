"""last_ref on every blob store of the package, sync and asyncio (T12).

The answers themselves are the kit's data-last-ref-exact and args-last-ref
checks; here: the range bound SQL backends scan, the asyncio twins and the
adapter's declaration, and PostgreSQL's two plans (the key scan where the ref
column orders like bytes, the run-index fallback elsewhere).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rulvar_store import (
    InvalidArgumentError,
    MemoryStore,
    MemoryTranscriptStore,
    open_store,
)
from rulvar_store.backend import (
    LastRefTranscriptStore,
    adapt_opened,
    has_last_ref,
    prefix_upper_bound,
)
from tests._async_openers import AsyncOpener, async_store_params


@pytest.mark.clause("T12")
@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        ("r/a", "r/b"),
        ("r/a\U0010ffff", "r/b"),
        ("r/\U0010ffff\U0010ffff", "r0"),
        ("r/\ud7ff", "r/\ue000"),
        ("r/", "r0"),
    ],
)
def test_the_bound_is_the_least_string_above_the_prefix(
    prefix: str, bound: str
) -> None:
    """[prefix, bound) holds exactly the strings that start with prefix."""
    assert prefix_upper_bound(prefix) == bound
    assert prefix < bound
    assert not bound.startswith(prefix)


ASYNC_STORES = async_store_params("lastref")


@pytest.mark.clause("T12")
@pytest.mark.parametrize("open_async", ASYNC_STORES)
def test_async_last_ref_answers_and_refuses_typed(
    open_async: AsyncOpener, tmp_path: Path
) -> None:
    """The asyncio twins answer like the sync stores and refuse bad prefixes typed."""

    async def scenario() -> list[str | None]:
        async with open_async(tmp_path) as opened:
            blobs = opened.transcripts
            assert has_last_ref(blobs)
            last_ref = blobs.last_ref  # type: ignore[attr-defined]  # has_last_ref said so
            for ref in ("run/c/1", "run/c/2", "run/c2/9", "other/c/9"):
                await blobs.put(ref, b"x")
            await blobs.delete("run/c/2")
            with pytest.raises(InvalidArgumentError):
                await last_ref("run", "other/c/")
            return [
                await last_ref("run", "run/c/"),
                await last_ref("run", "run/c"),
                await last_ref("run", "run/d"),
            ]

    assert asyncio.run(scenario()) == ["run/c/1", "run/c2/9", None]


@pytest.mark.clause("T12")
def test_the_adapter_offers_last_ref_only_over_a_store_that_has_it() -> None:
    """has_last_ref is the declaration: an adapter must not claim what it cannot do."""

    class Plain:
        """A complete blob store without last_ref."""

        def __init__(self) -> None:
            self._inner = MemoryTranscriptStore()
            self.put = self._inner.put
            self.get = self._inner.get
            self.list_refs = self._inner.list_refs
            self.delete = self._inner.delete

        def close(self) -> None:
            self._inner.close()

    async def scenario() -> tuple[bool, bool]:
        with_it = adapt_opened(open_store("memory://"))
        plain = open_store("memory://")
        without = adapt_opened(type(plain)(plain.journal, Plain(), plain.closers))
        try:
            return has_last_ref(with_it.transcripts), has_last_ref(without.transcripts)
        finally:
            await with_it.aclose()
            await without.aclose()

    assert asyncio.run(scenario()) == (True, False)


@pytest.mark.clause("T12")
def test_the_in_process_stores_pass_the_protocol() -> None:
    """MemoryStore's twin and MemoryTranscriptStore are LastRefTranscriptStores."""
    for store in (MemoryStore().transcripts(), MemoryTranscriptStore()):
        assert isinstance(store, LastRefTranscriptStore)
        assert has_last_ref(store)
