"""PostgreSQL's holder verdict (L11, L12): the liveness session, never a guess.

A real child process takes the lease through its own store and idles; the
parent's store judges it by the liveness lock its lease recorded.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from rulvar_store import LeaseHeldError
from rulvar_store_postgres import PostgresStore

pytestmark = pytest.mark.postgres

TTL_MS = 60_000
CHILD = """
import sys, time
from rulvar_store_postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2], ttl_ms=int(sys.argv[3]))
store.acquire("run", "child-holder")
print("held", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def holder(pg_url: str, schema: str) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, pg_url, schema, str(TTL_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def _take(store: PostgresStore, bound_s: float = 10.0) -> Any:
    """Poll acquire until granted or ``bound_s`` passes (then the refusal)."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            return store.acquire("run", "successor")
        except LeaseHeldError as refused:
            if time.monotonic() > deadline:
                return refused
            time.sleep(0.02)


@pytest.mark.clause("L12")
def test_a_refusal_names_the_holder_and_its_expiry(
    make_store: Callable[..., PostgresStore], holder: subprocess.Popen[str]
) -> None:
    """Once said as 'leased (live lease at epoch N)': now who, and until when."""
    with pytest.raises(LeaseHeldError) as refused:
        make_store(ttl_ms=TTL_MS).acquire("run", "successor")
    assert refused.value.holder == "child-holder"
    assert refused.value.epoch == 1
    assert refused.value.retry_after_ms is not None
    assert 0 < refused.value.retry_after_ms <= TTL_MS
    assert "child-holder" in str(refused.value)


@pytest.mark.clause("L11")
def test_a_killed_holder_is_taken_over_and_a_stopped_one_is_not(
    make_store: Callable[..., PostgresStore], holder: subprocess.Popen[str]
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    holder.send_signal(signal.SIGSTOP)
    with pytest.raises(LeaseHeldError):
        store.acquire("run", "successor")  # its session lives on while it is stopped
    holder.kill()
    holder.wait()
    taken = _take(store)
    assert not isinstance(taken, LeaseHeldError), taken
    assert taken.epoch == 2


@pytest.mark.clause("L11")
def test_a_lease_without_a_recorded_holder_is_never_judged_dead(
    make_store: Callable[..., PostgresStore],
    holder: subprocess.Popen[str],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    """As a lease the TypeScript store or an older version took: it waits its ttl."""
    store = make_store(ttl_ms=TTL_MS)
    admin.execute(f'DELETE FROM "{schema}".rulvar_py_lease_holders')
    holder.kill()
    holder.wait()
    refused = _take(store, bound_s=2.0)
    assert isinstance(refused, LeaseHeldError)
    assert refused.holder == "child-holder"
