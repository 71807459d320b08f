"""LeaseKeeper and AsyncLeaseKeeper (L8, L13): renewals keep a lease, a loss is told.

Real memory stores with short real ttls; every wait is bounded by an event with
a generous timeout, never a timed assertion.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Final

import pytest

from rulvar_store import (
    AsyncLeaseKeeper,
    Lease,
    LeaseKeeper,
    LeaseLostError,
    MemoryStore,
    StoreClosedError,
    StoreUnavailableError,
)

TTL_MS: Final = 300
BOUND_S: Final = 10.0


@pytest.mark.clause("L8")
def test_a_keeper_keeps_its_lease_past_several_ttls() -> None:
    ttl_ms = 1_000  # renewed every 333 ms: a loaded machine's scheduling fits in
    store = MemoryStore(ttl_ms=ttl_ms)
    lease = store.acquire("run", "holder")
    with LeaseKeeper.over(store, lease) as keeper:
        time.sleep(2.2 * ttl_ms / 1000)
        assert keeper.owned
        keeper.ensure_owned()
        store.append("run", {"seq": 1}, lease)  # still the live lease


@pytest.mark.clause("L13")
def test_a_refused_renewal_loses_the_lease_and_tells_once() -> None:
    store = MemoryStore(ttl_ms=TTL_MS)
    lease = store.acquire("run", "holder")
    told: list[LeaseLostError] = []
    lost = threading.Event()

    def on_lost(error: LeaseLostError) -> None:
        told.append(error)
        lost.set()

    with LeaseKeeper.over(store, lease, on_lost=on_lost) as keeper:
        store.release(lease)  # another handle gives it up: the renewal is refused
        assert lost.wait(BOUND_S)
        assert not keeper.owned
        with pytest.raises(LeaseLostError) as raised:
            keeper.ensure_owned()
    assert raised.value.reason == "refused"
    assert (raised.value.run_id, raised.value.epoch) == ("run", lease.epoch)
    assert len(told) == 1


class _Unreachable:
    """A store whose renewals never get through (the network is down)."""

    lease_ttl_ms = TTL_MS

    def __init__(self) -> None:
        self.attempts = 0

    def renew(self, lease: Lease) -> None:
        self.attempts += 1
        raise StoreUnavailableError("connection refused", "renew")


@pytest.mark.clause("L13")
def test_no_renewal_before_expiry_counts_as_lost() -> None:
    """Renewals are retried until the deadline, then the lease is lost as expired."""
    store = _Unreachable()
    lost = threading.Event()
    keeper = LeaseKeeper.over(
        store, Lease("run", "holder", 1), on_lost=lambda _: lost.set()
    )
    try:
        assert lost.wait(BOUND_S)
        assert keeper.lost is not None
        assert keeper.lost.reason == "expired"
        assert store.attempts >= 2  # retried, not given up at the first failure
    finally:
        keeper.stop()


@pytest.mark.clause("L13")
def test_a_renewal_on_a_closed_store_loses_the_lease_at_once() -> None:
    """A closed store cannot renew however long it is retried: lost as "failed",
    long before the expiry (the ttl is far longer than the wait), the cause kept."""
    store = MemoryStore(ttl_ms=3_000)  # first renewal after 1 s
    lease = store.acquire("run", "holder")
    lost = threading.Event()
    keeper = LeaseKeeper.over(store, lease, on_lost=lambda _: lost.set())
    try:
        store.close()
        assert lost.wait(BOUND_S)
        assert keeper.lost is not None
        assert keeper.lost.reason == "failed"
        assert isinstance(keeper.lost.__cause__, StoreClosedError)
    finally:
        keeper.stop()


class _Broken:
    """A store whose renew has a bug: every call raises a plain TypeError."""

    lease_ttl_ms = 3_000

    def __init__(self) -> None:
        self.attempts = 0

    def renew(self, lease: Lease) -> None:
        self.attempts += 1
        raise TypeError("renew() got an unexpected argument")

    async def arenew(self, lease: Lease) -> None:
        self.renew(lease)


@pytest.mark.clause("L13")
def test_an_unexpected_renewal_error_is_not_retried_as_if_transient() -> None:
    store = _Broken()
    lost = threading.Event()
    keeper = LeaseKeeper.over(
        store, Lease("run", "holder", 1), on_lost=lambda _: lost.set()
    )
    try:
        assert lost.wait(BOUND_S)
        assert keeper.lost is not None
        assert keeper.lost.reason == "failed"
        assert isinstance(keeper.lost.__cause__, TypeError)
        assert store.attempts == 1
        with pytest.raises(LeaseLostError):
            keeper.ensure_owned()
    finally:
        keeper.stop()


@pytest.mark.clause("L13")
def test_the_asyncio_keeper_loses_the_lease_on_an_incurable_renewal() -> None:
    async def scenario() -> tuple[LeaseLostError, int]:
        store = _Broken()
        told: asyncio.Future[LeaseLostError] = (
            asyncio.get_running_loop().create_future()
        )
        keeper = AsyncLeaseKeeper(
            store.arenew, Lease("run", "holder", 1), 3_000, on_lost=told.set_result
        )
        try:
            error = await asyncio.wait_for(told, BOUND_S)
            assert not keeper.owned
            return error, store.attempts
        finally:
            await keeper.stop()

    error, attempts = asyncio.run(scenario())
    assert (error.reason, attempts) == ("failed", 1)
    assert isinstance(error.__cause__, TypeError)


@pytest.mark.clause("L13")
def test_a_keeper_judges_expiry_by_its_own_clock() -> None:
    """A holder that was not scheduled past the ttl (a pause) is lost at once."""
    store = MemoryStore(ttl_ms=TTL_MS)
    lease = store.acquire("run", "holder")
    keeper = LeaseKeeper(store.renew, lease, TTL_MS, since=time.monotonic() - 1)
    try:
        assert not keeper.owned
        assert keeper.lost is not None
        assert keeper.lost.reason == "expired"
    finally:
        keeper.stop()


@pytest.mark.clause("L13")
def test_the_asyncio_keeper_tells_a_refused_renewal_on_the_loop() -> None:
    async def scenario() -> LeaseLostError:
        store = MemoryStore(ttl_ms=TTL_MS)
        lease = store.acquire("run", "holder")
        told: asyncio.Future[LeaseLostError] = (
            asyncio.get_running_loop().create_future()
        )

        async def renew(lease: Lease) -> None:
            store.renew(lease)

        keeper = AsyncLeaseKeeper(renew, lease, TTL_MS, on_lost=told.set_result)
        try:
            store.release(lease)
            error = await asyncio.wait_for(told, BOUND_S)
            assert not keeper.owned
            return error
        finally:
            await keeper.stop()

    assert asyncio.run(scenario()).reason == "refused"
