"""A closed store, and the blob store opened with it, refuse every call, typed.

``OpenedStore.close()`` ends both stores on every backend; each later call raises
``StoreClosedError`` (a ``ContractError``, never retryable) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from rulvar_store import Lease, StoreClosedError
from tests.intake._rigs import BACKENDS, GOOD_REF, GOOD_RUN, Rig, make_rig

CALLS: dict[str, Callable[[Rig], object]] = {
    "append": lambda rig: rig.journal.append(GOOD_RUN, {"seq": 2}, rig.lease),
    "load": lambda rig: rig.journal.load(GOOD_RUN),
    "put_meta": lambda rig: rig.journal.put_meta(
        {"runId": GOOD_RUN, "status": "ok", "updatedAt": "t2"}, rig.lease
    ),
    "get_meta": lambda rig: rig.journal.get_meta(GOOD_RUN),
    "list_runs": lambda rig: rig.journal.list_runs(),
    "delete": lambda rig: rig.journal.delete(GOOD_RUN, rig.lease),
    "blob-put": lambda rig: rig.blobs.put(GOOD_REF, b"late", rig.lease),
    "blob-get": lambda rig: rig.blobs.get(GOOD_REF),
    "blob-list_refs": lambda rig: rig.blobs.list_refs(GOOD_RUN),
    "blob-delete": lambda rig: rig.blobs.delete(GOOD_REF, rig.lease),
}
LEASE_CALLS: dict[str, Callable[[Rig, Lease], object]] = {
    "acquire": lambda rig, lease: rig.journal.acquire("other-run", "owner-b"),
    "renew": lambda rig, lease: rig.journal.renew(lease),
    "release": lambda rig, lease: rig.journal.release(lease),
}


@pytest.fixture(params=BACKENDS)
def closed_rig(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rig]:
    """A seeded rig, already closed (the teardown closes it again: idempotent)."""
    for made in make_rig(request.param, tmp_path_factory):
        made.close()
        yield made


def _refused(call: Callable[[], Any]) -> StoreClosedError:
    with pytest.raises(StoreClosedError) as caught:
        call()
    assert caught.value.retryable is False
    return caught.value


@pytest.mark.clause("T7")
def test_every_call_on_a_closed_store_raises_store_closed(closed_rig: Rig) -> None:
    """Journal and blob calls alike: closing the store closes its twin (T7)."""
    for name, call in CALLS.items():
        error = _refused(partial(call, closed_rig))
        assert error.operation, name


@pytest.mark.clause("T7")
def test_lease_calls_on_a_closed_store_raise_store_closed(closed_rig: Rig) -> None:
    """acquire, renew and release, where the backend has leases."""
    if closed_rig.lease is None:
        pytest.skip(f"{closed_rig.backend} stores have no leases (T8)")
    lease = closed_rig.lease
    for call in LEASE_CALLS.values():
        _refused(partial(call, closed_rig, lease))


def test_closing_twice_is_harmless(closed_rig: Rig) -> None:
    closed_rig.close()
    _refused(lambda: closed_rig.journal.load(GOOD_RUN))
