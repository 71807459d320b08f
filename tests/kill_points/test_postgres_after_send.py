"""PostgreSQL's after-send failpoint: the COMMIT is sent, the server decides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rulvar_store import LeasableStore
from rulvar_store.backend import Failpoint, LocationFactory, set_failpoint_hook


class HookFault(Exception):
    """Raised by the test hook once the COMMIT is on its way."""


@pytest.fixture
def fault_after_send() -> Iterator[None]:
    def hook(operation: str, point: Failpoint) -> None:
        if operation == "append" and point == "after-send":
            raise HookFault

    previous = set_failpoint_hook(hook)
    yield
    set_failpoint_hook(previous)


@pytest.mark.postgres
@pytest.mark.clause("J1")
def test_a_fault_after_send_leaves_the_commit_to_the_server(
    postgres_locations: LocationFactory, fault_after_send: None
) -> None:
    """The caller sees the fault, the server committed the append, the pool stays usable."""
    location = postgres_locations()
    with location.open() as opened:
        store = opened.journal
        assert isinstance(store, LeasableStore)
        lease = store.acquire("r", "o")
        with pytest.raises(HookFault):
            store.append("r", {"seq": 0}, lease)
        set_failpoint_hook(None)
        assert store.load("r") == [{"seq": 0}]
        for seq in (1, 2, 3):  # every pooled connection is clean afterwards
            store.append("r", {"seq": seq}, lease)
        assert [e["seq"] for e in store.load("r")] == [0, 1, 2, 3]
