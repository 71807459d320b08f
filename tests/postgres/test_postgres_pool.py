"""The pool under pressure: a refused growth (P14), interrupts at any moment (P12),
and the fast take and hand-back of an idle connection (P7).

White-box: the pool's connections and their lifetime (``_expire_at``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rulvar_store import RulvarError
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._pool import knows_idle_layout

pytestmark = pytest.mark.postgres


def _role_url(pg_url: str, role: str) -> str:
    server = pg_url.rpartition("@")[2] if "@" in pg_url else pg_url.split("://", 1)[1]
    return f"postgresql://{role}@{server}"


@pytest.mark.clause("P14")
def test_a_refused_growth_fails_no_caller_while_connections_work(
    pg_url: str, schema: str, make_role: Callable[..., str]
) -> None:
    """Role limit 2, pool of 8, 8 threads: the server refuses the third
    connection, and every caller is still served by the two that exist."""
    role = make_role("pw", connection_limit=2)
    threads, per_thread = 8, 40
    with PostgresStore(
        _role_url(pg_url, role), schema=schema, pool_max_size=8
    ) as store:
        store.get_meta("boot")

        def work(worker: int) -> list[str]:
            failures = []
            for seq in range(per_thread):
                try:
                    store.append(f"run-{worker}", {"seq": seq})
                except RulvarError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
            return failures

        with ThreadPoolExecutor(threads) as executor:
            failed = [f for fs in executor.map(work, range(threads)) for f in fs]
        assert not failed, f"{len(failed)} of {threads * per_thread}: {failed[:3]}"
        for worker in range(threads):
            assert [e["seq"] for e in store.load(f"run-{worker}")] == list(
                range(per_thread)
            )


@pytest.mark.clause("P14")
def test_a_refused_growth_fails_no_task_while_connections_work(
    pg_url: str, schema: str, make_role: Callable[..., str]
) -> None:
    """The asyncio twin: 8 tasks on a pool of 8 under a role limit of 2."""
    role = make_role("pw", connection_limit=2)
    tasks, per_task = 8, 40

    async def main() -> list[str]:
        url = _role_url(pg_url, role)
        async with AsyncPostgresStore(url, schema=schema, pool_max_size=8) as store:
            await store.get_meta("boot")

            async def work(worker: int) -> list[str]:
                failures = []
                for seq in range(per_task):
                    try:
                        await store.append(f"run-{worker}", {"seq": seq})
                    except RulvarError as exc:
                        failures.append(f"{type(exc).__name__}: {exc}")
                return failures

            results = await asyncio.gather(*(work(w) for w in range(tasks)))
            for worker in range(tasks):
                seqs = [e["seq"] for e in await store.load(f"run-{worker}")]
                assert seqs == list(range(per_task))
            return [f for fs in results for f in fs]

    failed = asyncio.run(main())
    assert not failed, f"{len(failed)} of {tasks * per_task}: {failed[:3]}"


_STORM = Path(__file__).with_name("interrupt_storm.py")


@pytest.mark.clause("P12")
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_interrupts_at_random_moments_leave_no_connection_checked_out(
    kind: str, pg_url: str, schema: str
) -> None:
    """Hundreds of real SIGINT (KeyboardInterrupt) and SIGUSR1 (SystemExit) land
    anywhere in calls on a pool of 2; afterwards nothing is checked out and the
    pool serves every call. In a child process: interrupts that leave an event
    loop upset CPython's own recursion bookkeeping in the interpreter they hit.
    """
    done = subprocess.run(
        [sys.executable, str(_STORM), kind, pg_url, schema],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["sent"] == result["signals"], result
    assert result["interrupted"] > result["signals"] // 4, result
    assert result["checked_out"] == 0, result
    assert result["after"] == 20, result


@pytest.mark.clause("P7")
def test_a_connection_past_its_lifetime_is_replaced_not_reused(
    pg_url: str, schema: str
) -> None:
    """The fast hand-back leaves an expired connection to the pool, which replaces it.

    A call takes the idle connection and puts it back without psycopg_pool's
    layers only while the pool would just append it; past ``max_lifetime`` the
    pool's own return closes it, and the next call runs on a new one.
    """
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        store.append("r", {"seq": 0})
        first = store._pool.getconn()
        pid = first.info.backend_pid
        first._expire_at = 0.0  # past its lifetime
        store._pool.putconn(first)
        store.append("r", {"seq": 1})  # takes it, hands it back: the pool closes it
        assert first.closed
        store.append("r", {"seq": 2})
        again = store._pool.getconn()
        try:
            assert again.info.backend_pid != pid
        finally:
            store._pool.putconn(again)
        assert [e["seq"] for e in store.load("r")] == [0, 1, 2]


@pytest.mark.clause("P7")
def test_callers_queued_for_the_only_connection_all_get_it_in_turn(
    pg_url: str, schema: str
) -> None:
    """With one connection and many callers, each hand-back serves a waiting one.

    The fast hand-back appends a connection to the idle ones only when nobody
    waits; here callers always wait, so every return goes through the pool,
    which passes the connection to the next in the queue (sync and asyncio).
    """
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        with ThreadPoolExecutor(8) as threads:
            list(threads.map(lambda n: store.append(f"t{n}", {"seq": 0}), range(32)))
        assert all(store.load(f"t{n}") == [{"seq": 0}] for n in range(32))

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
            await asyncio.gather(
                *(store.append(f"a{n}", {"seq": 0}) for n in range(32))
            )
            for n in range(32):
                assert await store.load(f"a{n}") == [{"seq": 0}]

    asyncio.run(main())


@pytest.mark.clause("P7")
def test_the_installed_psycopg_pool_has_the_layout_of_the_fast_path(
    pg_url: str, schema: str
) -> None:
    """The fast take and hand-back read private psycopg_pool attributes; a
    release that renames them turns the fast path off. This pins that the
    installed release still has it on, so such a change is seen, not silent."""

    async def async_fast_idle() -> bool:
        async with AsyncPostgresStore(pg_url, schema=schema) as store:
            await store.get_meta("boot")  # the pool opens on the first call
            return store._pool._fast_idle

    with PostgresStore(pg_url, schema=schema) as store:
        store.get_meta("boot")
        assert store._pool._fast_idle
    assert asyncio.run(async_fast_idle())
    assert not knows_idle_layout(object())


@pytest.mark.clause("P7")
def test_with_the_fast_path_off_every_call_takes_the_pools_own_doors(
    pg_url: str, schema: str
) -> None:
    """A pool without the layout (``_fast_idle`` off) serves every call through
    ``getconn``/``putconn``: queued callers and an expired connection included."""
    with PostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
        store._pool._fast_idle = False
        store.append("r", {"seq": 0})
        first = store._pool.getconn()
        first._expire_at = 0.0
        store._pool.putconn(first)
        assert first.closed  # the pool's own return replaced it
        with ThreadPoolExecutor(4) as threads:
            list(threads.map(lambda n: store.append(f"t{n}", {"seq": 0}), range(16)))
        assert all(store.load(f"t{n}") == [{"seq": 0}] for n in range(16))
        assert store._pool.get_stats()["requests_num"] >= 18

    async def main() -> None:
        async with AsyncPostgresStore(pg_url, schema=schema, pool_max_size=1) as store:
            store._pool._fast_idle = False
            await asyncio.gather(
                *(store.append(f"a{n}", {"seq": 0}) for n in range(16))
            )
            for n in range(16):
                assert await store.load(f"a{n}") == [{"seq": 0}]

    asyncio.run(main())
