"""Faults: refused and dropped connections, lock waits, retries, a paused holder.

Every failure reaches the caller as a typed store error (never a raw psycopg
exception), and the store recovers on the next call.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.errors
import pytest

from rulvar_store import LeaseHeldError, StoreBusyError, StoreUnavailableError
from rulvar_store.backend import Failpoint, set_failpoint_hook
from rulvar_store_postgres import PostgresStore

pytestmark = pytest.mark.postgres


Hook = Callable[[str, Failpoint], None]


@pytest.fixture
def hook() -> Iterator[Callable[[Hook | None], None]]:
    """Install (or remove, with None) a failpoint hook; restored after the test."""
    previous = set_failpoint_hook(None)

    def install(fn: Hook | None) -> None:
        set_failpoint_hook(fn)

    yield install
    set_failpoint_hook(previous)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.clause("P7")
def test_refused_port_is_a_retryable_store_unavailable_error() -> None:
    """A refused connection raises StoreUnavailableError (retryable), every time."""
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/test"
    with PostgresStore(url, schema="nowhere") as store:
        for _ in range(3):
            with pytest.raises(StoreUnavailableError) as caught:
                store.append("r", {"seq": 0})
            assert caught.value.retryable
            assert isinstance(caught.value.__cause__, psycopg.Error)


def _wait_until(
    condition: Callable[[], bool], what: str, limit_s: float = 30.0
) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.mark.clause("P7")
def test_terminated_connections_are_replaced_on_the_next_call(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """pg_terminate_backend of every store connection: the next call reconnects and works."""
    app = f"rulvar-test-{schema}"
    sep = "&" if "?" in pg_url else "?"
    with PostgresStore(f"{pg_url}{sep}application_name={app}", schema=schema) as store:
        store.append("r", {"seq": 0})
        count = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        assert (admin.execute(count, (app,)).fetchone() or (0,))[0] >= 1
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        )
        _wait_until(
            lambda: admin.execute(count, (app,)).fetchone() == (0,),
            "the terminated backends to exit",
        )
        store.append("r", {"seq": 1})
        assert store.load("r") == [{"seq": 0}, {"seq": 1}]


@pytest.mark.clause("P7")
def test_connection_dropped_mid_call_is_store_unavailable_then_recovers(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
    hook: Callable[[Hook | None], None],
) -> None:
    """A connection killed inside a transaction: StoreUnavailableError, nothing written."""
    store = make_store()
    store.get_meta("boot-probe")

    def kill_own_backend(op: str, point: Failpoint) -> None:
        if op == "append" and point == "after-fence-check":
            hook(None)
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE state = 'idle in transaction' AND query LIKE %s",
                (f'%"{schema}".rulvar_py_append%',),
            )
            time.sleep(0.2)  # let the backend go before the client speaks again

    hook(kill_own_backend)
    with pytest.raises(StoreUnavailableError):
        store.append("r", {"seq": 0})
    assert store.load("r") == []
    store.append("r", {"seq": 0})
    assert store.load("r") == [{"seq": 0}]


@pytest.mark.clause("P4")
def test_lock_wait_past_lock_timeout_is_store_busy(
    pg_url: str, make_store: Callable[..., PostgresStore], schema: str
) -> None:
    """A run lock held elsewhere past lock_timeout_ms gives StoreBusyError; nothing lands."""
    store = make_store(lock_timeout_ms=100)
    store.get_meta("boot-probe")
    with psycopg.connect(pg_url) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 8214))", (f"{schema}:r",)
        )
        with pytest.raises(StoreBusyError) as caught:
            store.append("r", {"seq": 0})
        assert caught.value.retryable
        with pytest.raises(StoreBusyError):
            store.acquire("r", "o")
        holder.rollback()
    assert store.load("r") == []
    store.append("r", {"seq": 0})
    assert store.acquire("r", "o").epoch == 1


@pytest.mark.clause("P4")
def test_serialization_failures_are_retried_a_bounded_number_of_times(
    make_store: Callable[..., PostgresStore],
    hook: Callable[[Hook | None], None],
) -> None:
    """40001/40P01 roll back and are retried; past the bound they become StoreBusyError."""
    store = make_store()
    store.get_meta("boot-probe")
    failures = {"left": 2, "seen": 0}

    def flaky(op: str, point: Failpoint) -> None:
        if op == "append" and point == "before-commit" and failures["left"] > 0:
            failures["left"] -= 1
            failures["seen"] += 1
            raise psycopg.errors.SerializationFailure("injected 40001")

    hook(flaky)
    store.append("r", {"seq": 0})
    assert failures["seen"] == 2
    assert store.load("r") == [{"seq": 0}]

    def always(op: str, point: Failpoint) -> None:
        if op == "append" and point == "before-commit":
            failures["seen"] += 1
            raise psycopg.errors.DeadlockDetected("injected 40P01")

    failures["seen"] = 0
    hook(always)
    with pytest.raises(StoreBusyError):
        store.append("r", {"seq": 1})
    hook(None)
    assert 1 < failures["seen"] <= 5
    assert store.load("r") == [{"seq": 0}]


@pytest.mark.clause("P3")
def test_schema_dropped_under_a_live_store_boots_again(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """A vanished schema gives a typed error once; the next call re-creates it."""
    store = make_store()
    store.append("r", {"seq": 0})
    admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    with pytest.raises(StoreUnavailableError):
        store.append("r", {"seq": 1})
    store.append("r", {"seq": 1})
    assert store.load("r") == [{"seq": 1}]


_STALLED_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from rulvar_store import set_failpoint_hook
    from rulvar_store_postgres import PostgresStore

    url, schema = sys.argv[1], sys.argv[2]
    store = PostgresStore(url, schema=schema, ttl_ms=2000,
                          idle_in_transaction_timeout_ms=1000)
    lease = store.acquire("stalled-run", "child")
    print(lease.epoch, flush=True)

    def stop_inside_the_transaction(op, point):
        if op == "append" and point == "after-fence-check":
            os.kill(os.getpid(), signal.SIGSTOP)

    set_failpoint_hook(stop_inside_the_transaction)
    try:
        store.append("stalled-run", {"seq": 0, "by": "paused child"}, lease)
    except Exception as exc:
        print(type(exc).__name__, flush=True)
    else:
        print("COMMITTED", flush=True)
    """
)


@pytest.mark.clause("L7")
@pytest.mark.clause("P7")
def test_paused_holder_inside_a_transaction_cannot_block_takeover(
    pg_url: str, make_store: Callable[..., PostgresStore], schema: str
) -> None:
    """A SIGSTOPped child holding the run lock in an open transaction is cut off.

    The child stops itself at after-fence-check (run lock held, transaction open).
    idle_in_transaction_session_timeout (1 s, below the 2 s ttl) ends its session,
    so after the ttl another instance acquires within a bounded time; the child's
    append never lands, and when it resumes it gets a typed error, not success.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", _STALLED_CHILD, pg_url, schema],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            _, err = child.communicate(timeout=10)
            pytest.fail(
                f"child did not stop inside its transaction: {err.decode()[-2000:]}"
            )
        taker = make_store(ttl_ms=2_000, lock_timeout_ms=200)
        deadline = time.monotonic() + 30
        while True:
            try:
                lease = taker.acquire("stalled-run", "taker")
                break
            except (LeaseHeldError, StoreBusyError):
                if time.monotonic() > deadline:
                    pytest.fail("takeover stayed blocked by the paused holder")
                time.sleep(0.05)
        assert lease.epoch == 2
        taker.append("stalled-run", {"seq": 0, "by": "taker"}, lease)
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=30)
        lines = out.decode().split()
        assert lines[0] == "1", err.decode()[-2000:]
        assert lines[1] in ("StoreUnavailableError", "LeaseHeldError"), lines
        assert taker.load("stalled-run") == [{"seq": 0, "by": "taker"}]
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
