"""P13: every call is bounded over a stalled link (a real proxy that stops forwarding).

The kit's ``FaultProxy`` sits on loopback between the store and the server;
``stall()`` keeps every connection open while nothing is forwarded, which is
what a stuck middlebox or a frozen server looks like to the client. Renew and
reads must fail with the retryable ``StoreUnavailableError`` while the link is
still stalled (the test waits for the call with a generous cap and resumes the
link only afterwards), and the store serves again once the link is back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.fault_proxy import FaultProxy
from rulvar_conformance.harness.kit import CheckNotRun
from rulvar_conformance.suites.stalled_link import stalled_link_conformance
from rulvar_store import ConfigError, StoreUnavailableError
from rulvar_store.backend import (
    locations_from_factory,
    parse_store_url,
    resolve_backend,
)
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

pytestmark = pytest.mark.postgres

TTL_MS = 2_000
CAP_S = 30.0  # far beyond any bound: reaching it means the call was unbounded


def _through(pg_url: str, proxy: FaultProxy) -> str:
    parts = urlsplit(pg_url)
    userinfo = parts.netloc.rpartition("@")[0]
    host, port = proxy.address
    return parts._replace(netloc=f"{userinfo}@{host}:{port}").geturl()


def _target(pg_url: str) -> tuple[str, int]:
    parts = urlsplit(pg_url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def _fails_while_stalled(call: Callable[[], Any]) -> BaseException:
    """Run ``call`` in a thread; it must raise before the cap (the link stays stalled)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(CAP_S)
    assert not worker.is_alive(), f"still blocked after {CAP_S} s over a stalled link"
    error = outcome[0]
    assert error is not None, "the call succeeded over a stalled link"
    return error


# One connection: once the stalled call's connection is cut, the next call finds
# none to wait for, only an attempt to connect that cannot finish: unreachable,
# not a busy pool. The default size has an idle second connection to cut too.
POOL_SIZES = pytest.mark.parametrize(
    "pool_max_size", [10, 1], ids=["default-pool", "one-connection"]
)


@pytest.mark.clause("P13")
@POOL_SIZES
def test_renew_and_reads_fail_typed_over_a_stalled_link(
    pg_url: str, schema: str, pool_max_size: int
) -> None:
    with FaultProxy(_target(pg_url)) as proxy:
        url = _through(pg_url, proxy)
        with PostgresStore(
            url, schema=schema, ttl_ms=TTL_MS, pool_max_size=pool_max_size
        ) as store:
            lease = store.acquire("r", "holder")
            store.renew(lease)
            proxy.stall()
            try:
                for call in (lambda: store.renew(lease), lambda: store.get_meta("r")):
                    error = _fails_while_stalled(call)
                    assert isinstance(error, StoreUnavailableError), repr(error)
                    assert error.retryable
                    assert "call_timeout_ms" in str(error)
            finally:
                proxy.resume()  # an unbounded call ends now, so the test ends
            # The cut connections were discarded; new ones serve.
            store.renew(store.acquire("other", "holder"))
            assert store.get_meta("r") is None


@pytest.mark.clause("P13")
@POOL_SIZES
def test_async_renew_and_reads_fail_typed_over_a_stalled_link(
    pg_url: str, schema: str, pool_max_size: int
) -> None:
    with FaultProxy(_target(pg_url)) as proxy:
        url = _through(pg_url, proxy)

        async def main() -> None:
            async with AsyncPostgresStore(
                url, schema=schema, ttl_ms=TTL_MS, pool_max_size=pool_max_size
            ) as store:
                lease = await store.acquire("r", "holder")
                await store.renew(lease)
                proxy.stall()
                try:
                    calls: tuple[Callable[[], Awaitable[object]], ...] = (
                        lambda: store.renew(lease),
                        lambda: store.get_meta("r"),
                    )
                    for call in calls:
                        with pytest.raises(StoreUnavailableError) as caught:
                            await asyncio.wait_for(call(), CAP_S)
                        assert caught.value.retryable
                        assert "call_timeout_ms" in str(caught.value)
                finally:
                    proxy.resume()  # an unbounded call ends now, so the test ends
                await store.renew(await store.acquire("other", "holder"))
                assert await store.get_meta("r") is None

        asyncio.run(main())


@pytest.mark.clause("P13", "L10")
def test_the_kit_stalled_link_check_passes_on_postgres(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    certify = resolve_backend(url).certify
    assert certify is not None
    with certify(url) as locations:
        for check in stalled_link_conformance(
            Certification(locations, frozenset())
        ).checks:
            check.run()


@pytest.mark.clause("L10")
def test_the_kit_stalled_link_check_does_not_run_without_a_route() -> None:
    from rulvar_store import MemoryStore, OpenedStore

    def fresh(ttl_ms: int | None) -> OpenedStore:
        store = MemoryStore(ttl_ms=ttl_ms) if ttl_ms else MemoryStore()
        return OpenedStore(journal=store, transcripts=store.transcripts())

    certification = Certification(locations_from_factory(fresh), frozenset())
    (check,) = stalled_link_conformance(certification).checks
    with pytest.raises(CheckNotRun, match="no TCP route"):
        check.run()


@pytest.mark.clause("P13")
@pytest.mark.parametrize(
    ("value", "accepted"),
    [("1500", True), ("abc", False), ("0", False), ("-5", False), ("400", False)],
)
def test_call_timeout_ms_is_validated(pg_url: str, value: str, accepted: bool) -> None:
    url = f"{pg_url}?call_timeout_ms={value}&lock_timeout_ms=500"
    if accepted:
        PostgresStore(url).close()
        return
    with pytest.raises(ConfigError, match="call_timeout_ms"):
        PostgresStore(url)
