"""open_store_async prefers a backend's native async opener over the adapter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from rulvar_store import AsyncOpenedStore, OpenedStore, open_store, open_store_async
from rulvar_store.backend import (
    Backend,
    StoreUrl,
    adapt_opened,
    hookimpl,
    make_plugin_manager,
)


class _NativeMarker:
    """Records that the async opener ran and hands an adapted memory store back."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    async def open_async(self, url: StoreUrl) -> AsyncOpenedStore:
        self.opened.append(url.scheme)
        return adapt_opened(open_store("memory://"), label="native")

    def open(self, url: StoreUrl) -> OpenedStore:
        raise AssertionError("the sync opener must not run when open_async exists")

    @hookimpl
    def rulvar_store_backends(self) -> Sequence[Backend]:
        return [
            Backend(
                name="nativetest",
                schemes=("nativetest",),
                open=self.open,
                open_async=self.open_async,
            )
        ]


@pytest.mark.clause("Y1")
def test_open_store_async_uses_the_backends_async_opener() -> None:
    plugin = _NativeMarker()
    manager = make_plugin_manager(load_entry_points=False)
    manager.register(plugin)

    async def scenario() -> None:
        async with open_store_async("nativetest://x", manager=manager) as opened:
            await opened.journal.append("run-a", {"seq": 1})

    asyncio.run(scenario())
    assert plugin.opened == ["nativetest"]


@pytest.mark.clause("Y1")
def test_rulvar_stores_says_which_backends_are_native_async() -> None:
    from click.testing import CliRunner

    from rulvar_cli.stores import stores_command

    result = CliRunner().invoke(stores_command, ["--json"])
    assert result.exit_code == 0
    rows = {row["name"]: row["async"] for row in json.loads(result.output)["backends"]}
    assert rows["memory"] == "adapter"
    assert set(rows.values()) <= {"native", "adapter"}
