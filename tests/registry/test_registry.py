"""The backend registry: built-ins through entry points, clear typed errors."""

from __future__ import annotations

from collections.abc import Sequence

import pluggy
import pytest

from rulvar_store import (
    ConfigError,
    MemoryStore,
    OpenedStore,
    list_backends,
    open_store,
)
from rulvar_store.backend import Backend, hookimpl, make_plugin_manager


def test_builtins_register_through_the_entry_point_group() -> None:
    infos = {info.backend.name: info for info in list_backends()}
    assert {"memory", "file"} <= set(infos)
    assert infos["memory"].distribution == "rulvar-stores"
    assert infos["memory"].plugin_name == "memory"


def test_memory_url_opens_a_fenced_pair_with_the_ttl_option() -> None:
    with open_store("memory://?ttl_ms=1234") as opened:
        assert isinstance(opened.journal, MemoryStore)
        assert opened.journal.lease_ttl_ms == 1234
        assert opened.transcripts is opened.journal.transcripts()


def test_each_memory_open_is_a_fresh_domain() -> None:
    with open_store("memory://") as first, open_store("memory://") as second:
        first.journal.append("r", {"seq": 0})
        assert second.journal.load("r") == []


def test_unknown_scheme_is_a_config_error_listing_known_schemes() -> None:
    with pytest.raises(
        ConfigError, match=r"no store backend for scheme 'nope'.*memory"
    ):
        open_store("nope://x")


@pytest.mark.parametrize("url", ["", "memory", "runs.db"])
def test_malformed_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="URL"):
        open_store(url)


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ttl_ms"):
        open_store("memory://?tll_ms=5")


def test_credentials_never_appear_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        open_store("nope://alice:hunter2@host/db")
    assert "hunter2" not in str(info.value)
    assert "alice:***@host" in str(info.value)


class _FakePlugin:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @hookimpl
    def rulvar_store_backends(self) -> Sequence[Backend]:
        return [self.backend]


def _manager_with(backend: Backend) -> pluggy.PluginManager:
    manager = make_plugin_manager(load_entry_points=False)
    manager.register(_FakePlugin(backend), "fake")
    return manager


def test_backend_whose_extra_is_missing_says_what_to_install() -> None:
    backend = Backend(
        name="fancy",
        schemes=("fancy",),
        open=lambda url: OpenedStore(
            journal=MemoryStore(), transcripts=MemoryStore().transcripts()
        ),
        requires=("rulvar_definitely_missing_driver",),
        extra="fancy",
    )
    manager = _manager_with(backend)
    with pytest.raises(ConfigError, match=r"pip install 'rulvar-stores\[fancy\]'"):
        open_store("fancy://x", manager=manager)
    [info] = list_backends(manager)
    assert info.installed is False
