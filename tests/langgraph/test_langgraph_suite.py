"""LangGraph's own checkpointer suite certifies AsyncRulvarSaver at FULL (G12).

``langgraph-checkpoint-conformance`` (pinned in the dev extra) calls only the
async methods and counts a capability as present when its async method is
overridden: all eight must be detected and all 81 tests of version 0.0.2 pass,
on memory, SQLite and PostgreSQL (one fresh location per capability suite).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate

from rulvar_langgraph import AsyncRulvarSaver
from rulvar_store import AsyncStoreOpening, open_store_async
from rulvar_store.backend import LocationFactory, StoreLocation, UrlOpener

CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def open_async(location: StoreLocation) -> AsyncStoreOpening:
    """An asyncio handle on ``location``: its URL, or a fresh memory domain."""
    if isinstance(location.opener, UrlOpener):
        return open_store_async(location.opener.url, **location.opener.options)
    return open_store_async("memory://")


async def _validate(locations: LocationFactory) -> dict[str, object]:
    with ExitStack() as cleanup:

        @checkpointer_test(name="AsyncRulvarSaver")
        async def fresh_saver() -> AsyncIterator[AsyncRulvarSaver]:
            location = locations()
            cleanup.callback(location.remove)
            async with open_async(location) as opened:
                yield AsyncRulvarSaver.over(opened, owner="conformance")

        report = await validate(fresh_saver)
        result: dict[str, object] = report.to_dict()
        return result


@pytest.mark.clause("G12")
def test_async_saver_passes_langgraph_conformance_at_full(
    locations: LocationFactory,
) -> None:
    """validate() reports FULL, every capability detected, 81 passed and none failed."""
    report = asyncio.run(_validate(locations))
    results = report["results"]
    assert isinstance(results, dict)
    detected = {name for name, result in results.items() if result["detected"]}
    failures = {
        name: result["failures"]
        for name, result in results.items()
        if result["failures"]
    }
    assert failures == {}
    assert detected == CAPABILITIES
    assert report["conformance_level"] == "FULL"
    assert sum(result["tests_passed"] for result in results.values()) == 81
    assert sum(result["tests_failed"] for result in results.values()) == 0
