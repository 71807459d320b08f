"""P16-P22: the PostgreSQL store on replicated servers, on real private clusters.

Each test starts its own PostgreSQL 15 primary (and, where it needs one, a
streaming standby made with ``pg_basebackup``) on free loopback ports
(``tests._replicated_pg``); the shared test server is never reconfigured.
Faults are real: a standby promoted while the old primary keeps serving (a
zombie), ``synchronous_standby_names`` naming a standby that is not there (every
commit waits), a server turned read-only under a pooled connection, a
cancelled wait for the synchronous standby. Each seeded defect (a store that
reports the cancelled-wait COMMIT as success; a pool that keeps a read-only
connection; a store that ignores the replication guard) runs the same check
and must be caught by it. Each test is bounded (about 3-15 s here).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import rulvar_store_postgres._pool as pool_module
import rulvar_store_postgres._transaction as transaction_module
from rulvar_cli._durability import durability_line, durability_of
from rulvar_store import (
    ConfigError,
    StoreUnavailableError,
    open_store,
    open_store_async,
)
from rulvar_store.backend import parse_store_url, resolve_backend
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore
from rulvar_store_postgres._primary import Cluster
from rulvar_store_postgres._sessions import wait_ended
from tests._replicated_pg import Pair, pair, set_standby_names, sql

pytestmark = pytest.mark.postgres

# ttl 4 s: call_timeout_ms 2 s, lock_timeout_ms 1 s (``_config`` defaults).
TTL_MS = 4000


def _url(p: Pair, *clusters: Any) -> str:
    hosts = ",".join(p.tcp(cluster) for cluster in clusters)
    return f"postgresql://postgres@{hosts}/postgres"


def _waiting_for_standby(cluster: Any) -> list[int]:
    """Backends of ``cluster`` waiting for a synchronous standby (wait_event SyncRep)."""
    return [
        row[0]
        for row in sql(
            cluster,
            "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
        )
    ]


def _until(condition: Callable[[], Any], limit_s: float, what: str) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {limit_s} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def primary() -> Iterator[Pair]:
    """One private primary for the tests that need no standby (faster than one each)."""
    with pair() as made:
        yield made


@contextlib.contextmanager
def _reset(p: Pair) -> Iterator[Pair]:
    """The shared primary, its settings back to the defaults afterwards, pass or fail."""
    try:
        yield p
    finally:
        set_standby_names(p.primary, "")
        sql(p.primary, "ALTER SYSTEM RESET default_transaction_read_only")
        sql(p.primary, "SELECT pg_reload_conf()")


def _fresh(prefix: str) -> str:
    """A schema name no other test of the shared primary uses."""
    return f"{prefix}_{secrets.token_hex(4)}"


# -- P17: a cancelled wait for the synchronous standby is no success ----------


def _cancelled_wait_outcome(p: Pair) -> str | None:
    """Cancel a COMMIT's wait for its synchronous standby; describe a false success.

    The server commits locally and reports success with a WARNING; the store
    must raise an unknown outcome. Returns what went wrong, or ``None``.
    """
    schema = _fresh("p17")
    with PostgresStore(_url(p, p.primary), schema=schema) as store:
        store.append("r", {"seq": 0})
        set_standby_names(p.primary, "nosuch")  # every commit now waits
        outcome: list[BaseException | None] = []
        writer = threading.Thread(
            target=lambda: outcome.append(_error_of(store.append, "r", {"seq": 1}))
        )
        writer.start()
        pid = _until(lambda: _waiting_for_standby(p.primary), 5, "no commit waited")[0]
        sql(p.primary, "SELECT pg_cancel_backend(%s)", (pid,))
        writer.join(10)
        set_standby_names(p.primary, "")
        rows = sql(p.primary, f"SELECT count(*) FROM {schema}.rulvar_entries")
    assert rows[0][0] == 2, "the cancelled commit is committed on the primary"
    error = outcome[0]
    if error is None:
        return "the append whose sync-rep wait was cancelled returned success"
    if not isinstance(error, StoreUnavailableError) or "unknown" not in str(error):
        return f"not an unknown outcome: {error!r}"
    return None


def _error_of(call: Callable[..., Any], *args: Any) -> BaseException | None:
    try:
        call(*args)
    except Exception as exc:
        return exc
    return None


@pytest.mark.clause("P17")
def test_a_cancelled_sync_replication_wait_is_an_unknown_outcome_not_success(
    primary: Pair,
) -> None:
    """P17: the WARNING'd COMMIT raises StoreUnavailableError (unknown), retryable."""
    with _reset(primary) as p:
        assert _cancelled_wait_outcome(p) is None


@pytest.mark.clause("P17")
def test_seeded_store_reporting_the_cancelled_wait_as_success_is_caught(
    primary: Pair,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P17 seeded defect: a store that ignores the WARNING notice returns success."""
    monkeypatch.setattr(transaction_module, "confirmed", lambda conn, row: row)
    with _reset(primary) as p:
        assert _cancelled_wait_outcome(p) == (
            "the append whose sync-rep wait was cancelled returned success"
        )


# -- P19: a call cut at its deadline ends its server session ------------------


def _left_waiting_after_cut(p: Pair) -> list[int]:
    """A commit stuck waiting for a standby, cut at the call's deadline: who still waits."""
    schema = _fresh("p19")
    with PostgresStore(_url(p, p.primary), schema=schema, ttl_ms=TTL_MS) as store:
        store.append("r", {"seq": 0})
        set_standby_names(p.primary, "nosuch")
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.append("r", {"seq": 1})
        assert time.monotonic() - started < 4, "cut at call_timeout_ms (2 s)"
        assert caught.value.retryable
        assert "unknown" in str(caught.value)
        wait_ended(10)
        time.sleep(0.5)  # a terminated backend exits at once; give it a moment
        left = _waiting_for_standby(p.primary)
        set_standby_names(p.primary, "")
    return left


@pytest.mark.clause("P19")
def test_a_call_cut_at_its_deadline_ends_its_server_session(primary: Pair) -> None:
    """P19: no session is left on the server waiting (and holding the run's lock)."""
    with _reset(primary) as p:
        assert _left_waiting_after_cut(p) == []


@pytest.mark.clause("P19")
def test_without_ending_the_session_it_stays_waiting(
    primary: Pair,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P19 control: closing the socket alone leaves the backend waiting for the standby."""
    monkeypatch.setattr(pool_module, "end_session", lambda *args: None)
    with _reset(primary) as p:
        assert len(_left_waiting_after_cut(p)) == 1


@pytest.mark.clause("P17")
@pytest.mark.clause("P19")
def test_the_asyncio_store_reports_the_cancelled_wait_unknown_and_ends_cut_sessions(
    primary: Pair,
) -> None:
    """P17/P19 on AsyncPostgresStore: the same notice check and session ending."""

    async def scenario(p: Pair) -> None:
        store = AsyncPostgresStore(
            _url(p, p.primary), schema=_fresh("ay"), ttl_ms=TTL_MS
        )
        try:
            await store.append("r", {"seq": 0})
            set_standby_names(p.primary, "nosuch")
            task = asyncio.ensure_future(store.append("r", {"seq": 1}))
            waiting = await asyncio.to_thread(
                _until, lambda: _waiting_for_standby(p.primary), 1.5, "no wait"
            )
            sql(p.primary, "SELECT pg_cancel_backend(%s)", (waiting[0],))
            with pytest.raises(StoreUnavailableError, match="unknown"):
                await task
            with pytest.raises(StoreUnavailableError, match="call_timeout_ms"):
                await store.append("r", {"seq": 2})  # cut at 2 s
            await asyncio.to_thread(wait_ended, 10)
            await asyncio.sleep(0.5)
            assert _waiting_for_standby(p.primary) == []
            set_standby_names(p.primary, "")
        finally:
            await store.aclose()

    with _reset(primary) as p:
        asyncio.run(scenario(p))


# -- P20: the durability guard ------------------------------------------------


def _guard_lets_through(p: Pair) -> list[str]:
    """Writes a ``replication=required`` store was allowed on an async server."""
    landed: list[str] = []
    url = _url(p, p.primary) + "?replication=required"
    schema = _fresh("p20")
    for through_open_store in (False, True):
        append: Callable[..., Any]
        close: Callable[[], Any]
        if through_open_store:
            opened = open_store(url, schema=schema)
            append, close = opened.journal.append, opened.close
        else:
            direct = PostgresStore(url, schema=schema)
            append, close = direct.append, direct.close
        try:
            error = _error_of(append, "r", {"seq": len(landed)})
        finally:
            close()
        if error is None:
            landed.append("append accepted")
            continue
        assert isinstance(error, ConfigError), repr(error)
        assert "synchronous_mode" in str(error)
        assert "async" in str(error)
    return landed


@pytest.mark.clause("P20")
def test_durability_tells_async_from_sync_and_quorum_and_the_guard_refuses_async(
    primary: Pair,
) -> None:
    """P20: durability() names the mode; replication=required refuses async only."""
    with _reset(primary) as p:
        schema = _fresh("p20")
        with PostgresStore(_url(p, p.primary), schema=schema) as store:
            report = store.durability()
            assert (report.observed, report.replication) == ("on", "async")
            assert "can lose acknowledged commits" in report.detail
            set_standby_names(p.primary, "FIRST 1 (s1, s2)")
            assert store.durability().replication == "sync"
            set_standby_names(p.primary, "ANY 2 (s1, s2, s3)")
            quorum = store.durability()
            assert quorum.replication == "quorum"
            assert "0 synchronous now" in quorum.detail
            set_standby_names(p.primary, "")
        assert _guard_lets_through(p) == []
        # A synchronous server is accepted (its commits wait: read only here).
        set_standby_names(p.primary, "s1")
        with PostgresStore(
            _url(p, p.primary), schema=schema, replication="required"
        ) as store:
            assert store.durability().replication == "sync"
            assert store.load("r") == []


@pytest.mark.clause("P20")
def test_seeded_store_ignoring_the_guard_is_caught(
    primary: Pair,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P20 seeded defect: a store that never refuses writes on an async server."""
    monkeypatch.setattr(Cluster, "admit", lambda self, state: None)
    with _reset(primary) as p:
        assert _guard_lets_through(p) == ["append accepted", "append accepted"]


# -- P18: read-only servers are passed over, read-only connections dropped ----


def _read_only_problems(p: Pair) -> list[str]:
    """Turn the server read-only under a pooled connection; what went wrong."""
    problems = []
    schema = _fresh("p18")
    with PostgresStore(_url(p, p.primary), schema=schema, pool_max_size=1) as store:
        store.append("r", {"seq": 0})
        pids = {row[0] for row in sql(
            p.primary,
            "SELECT pid FROM pg_stat_activity "
            "WHERE application_name = 'rulvar-store-postgres'",
        )}  # fmt: skip
        sql(p.primary, "ALTER SYSTEM SET default_transaction_read_only = on")
        sql(p.primary, "SELECT pg_reload_conf()")
        time.sleep(0.3)
        error = _error_of(store.append, "r", {"seq": 1})
        typed = isinstance(error, StoreUnavailableError) and error.retryable
        if not typed or "read-only" not in str(error):
            problems.append(f"not a typed retryable error: {error!r}")
        time.sleep(0.3)
        still = {row[0] for row in sql(p.primary, "SELECT pid FROM pg_stat_activity")}
        if pids & still:
            problems.append("the read-only session was kept in the pool")
        sql(p.primary, "ALTER SYSTEM RESET default_transaction_read_only")
        sql(p.primary, "SELECT pg_reload_conf()")
    return problems


@pytest.mark.clause("P18")
def test_a_connection_found_read_only_is_dropped_and_the_call_fails_retryable(
    primary: Pair,
) -> None:
    """P18: SQLSTATE 25006 on a pooled connection: typed retryable error, session closed."""
    with _reset(primary) as p:
        assert _read_only_problems(p) == []


@pytest.mark.clause("P18")
def test_seeded_pool_keeping_a_read_only_connection_is_caught(
    primary: Pair,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """P18 seeded defect: a pool that hands the read-only connection back."""
    monkeypatch.setattr(pool_module, "discarded_why", lambda exc: None)
    with _reset(primary) as p:
        assert "the read-only session was kept in the pool" in _read_only_problems(p)


@pytest.mark.clause("P18")
@pytest.mark.clause("P16")
def test_a_standby_listed_first_is_passed_over_and_the_primary_reached() -> None:
    """P16/P18: a standby first in the URL is passed over, even with 'any'; alone it
    fails the call typed and retryable."""
    with pair(standby=True) as p:
        assert p.standby is not None
        url = _url(p, p.standby, p.primary)
        with PostgresStore(url, schema="p16") as store:
            store.append("r", {"seq": 0})  # target_session_attrs=read-write
        # libpq takes the standby; the store refuses it, tries it last, and
        # reaches the primary within the same call.
        with PostgresStore(f"{url}?target_session_attrs=any", schema="p16") as store:
            assert store.load("r") == [{"seq": 0}]
            store.append("r", {"seq": 1})
        # An observer reads from the standby (replayed by now: sync names empty).
        _until(lambda: _replayed(p.standby, "p16") == 2, 10, "no replay")
        with PostgresStore(_url(p, p.standby), schema="p16", readonly=True) as seen:
            assert seen.load("r") == [{"seq": 0}, {"seq": 1}]
            time.sleep(1.1)  # its connection is asked again: still served
            assert seen.load("r") == [{"seq": 0}, {"seq": 1}]
        alone = f"{_url(p, p.standby)}?target_session_attrs=any"
        with PostgresStore(alone, schema="p16") as store:
            error = _error_of(store.load, "r")
            assert isinstance(error, StoreUnavailableError), repr(error)
            assert error.retryable
            assert "in recovery" in str(error)


# -- P21: after a failover the pool reaches the new primary by itself ---------


@pytest.mark.clause("P21")
def test_a_zombie_primary_listed_first_loses_writers_and_readers_to_the_new_one() -> (
    None
):
    """P21: sync replication, standby promoted, old primary serving on (zombie, first in URL).

    Writes to the zombie wait for the standby it lost and are cut at their
    deadline (unknown outcome, their sessions ended); the next connection
    tries the other host first and lands on the new primary; a reader whose
    pooled connection is on the zombie moves off it; nothing is acknowledged
    by the zombie after the promotion.
    """
    with pair(standby=True) as p:
        assert p.standby is not None
        set_standby_names(p.primary, "standby1")
        url = _url(p, p.primary, p.standby)
        writer = PostgresStore(url, schema="p21", ttl_ms=TTL_MS)
        reader = PostgresStore(url, schema="p21", ttl_ms=TTL_MS)
        try:
            lease = writer.acquire("r", "w")
            writer.append("r", {"seq": 0}, lease)
            assert reader.load("r") == [{"seq": 0}]
            p.promote()
            promoted = time.monotonic()
            acknowledged: list[int] = []
            seq = 1
            while len(acknowledged) < 3:
                assert time.monotonic() - promoted < 15, (
                    "no write reached the new primary"
                )
                error = _error_of(writer.append, "r", {"seq": seq}, lease)
                if error is None:
                    acknowledged.append(seq)
                else:  # a cut commit on the zombie: unknown outcome, retryable
                    assert isinstance(error, StoreUnavailableError), repr(error)
                seq += 1
            first_ack_s = time.monotonic() - promoted
            # Every acknowledged write is on the new primary.
            on_new = {
                row[0]
                for row in sql(
                    p.standby,
                    "SELECT (payload::jsonb->>'seq')::int FROM p21.rulvar_entries",
                )
            }
            assert set(acknowledged) <= on_new
            # The reader leaves the zombie (its pooled connection is re-asked
            # after PROBE_EVERY_S and found without its synchronous standby).
            time.sleep(1.1)
            _until(
                lambda: {"seq": acknowledged[-1]} in _loaded(reader),
                5,
                "the reader kept answering from the zombie",
            )
            wait_ended(10)
            time.sleep(0.5)
            assert _waiting_for_standby(p.primary) == []
            # Liveness, not speed: bounded by a cut (2 s) and a reconnect.
            assert first_ack_s < 10, first_ack_s
        finally:
            writer.close()
            reader.close()


@pytest.mark.clause("P21")
def test_an_async_zombie_listed_first_is_left_once_its_standbys_are_gone() -> None:
    """P21, async: the zombie keeps acknowledging (those writes are lost), but the
    writer leaves it within seconds: it had a standby and has none left."""
    with pair(standby=True) as p:
        assert p.standby is not None
        writer = PostgresStore(
            _url(p, p.primary, p.standby), schema="az", ttl_ms=TTL_MS
        )
        try:
            writer.append("r", {"seq": 0})
            p.promote()
            promoted = time.monotonic()
            seq = 0
            while True:
                assert time.monotonic() - promoted < 15, (
                    "the writer stayed on the zombie"
                )
                seq += 1
                if _error_of(writer.append, "r", {"seq": seq}) is not None:
                    continue
                on_new = sql(
                    p.standby,
                    "SELECT count(*) FROM az.rulvar_entries "
                    "WHERE (payload::jsonb->>'seq')::int = %s",
                    (seq,),
                )[0][0]
                if on_new:
                    break
                time.sleep(0.1)
            # Liveness, not speed: one probe interval plus one suspicion.
            assert time.monotonic() - promoted < 10
        finally:
            writer.close()


def _loaded(store: PostgresStore) -> list[Any]:
    try:
        return store.load("r")
    except StoreUnavailableError:
        return []


# -- P22: what an asynchronous failover does to epochs ------------------------


def _replayed(standby: Any, schema: str) -> int:
    """Entries the standby has replayed (0 while the table has not reached it)."""
    try:
        return int(sql(standby, f"SELECT count(*) FROM {schema}.rulvar_entries")[0][0])
    except psycopg.Error:
        return 0


@pytest.mark.clause("P22")
def test_an_async_failover_that_loses_an_acquire_reissues_its_epoch() -> None:
    """P22: the rule, shown: async replication, a takeover lost in the failover.

    ``a`` holds epoch 1 (replicated); the standby stops receiving; ``b`` takes
    the run over with epoch 2, acknowledged by the primary only; the primary
    dies and the standby is promoted. On the new timeline ``a``'s lease is
    live again (its writes pass), and epoch 2 is handed out again: to ``b``'s
    owner string when it acquires again (then the lost ``b`` passes the fence
    too). ``replication=required`` refuses such a cluster before any of it.
    """
    with pair(standby=True) as p:
        assert p.standby is not None
        standby = p.standby
        with PostgresStore(_url(p, p.primary), schema="p22", ttl_ms=60_000) as old:
            a = old.acquire("r", "a")
            old.append("r", {"seq": 0}, a)
            _until(
                lambda: _replayed(standby, "p22"),
                10,
                "the standby never replayed",
            )
            standby.stop("immediate")  # the standby stops receiving WAL
            old.release(a)
            b = old.acquire("r", "b")
            assert b.epoch == 2  # acknowledged, by the primary alone
            p.primary.kill()  # host death: epoch 2 dies with it
        standby.start()
        p.promote()
        with PostgresStore(_url(p, standby), schema="p22", ttl_ms=60_000) as new:
            assert new.durability().replication == "async"
            new.append("r", {"seq": 1}, a)  # a, superseded by b, writes again
            new.release(a)
            assert new.acquire("r", "b") == b  # epoch 2 handed out twice
            new.append("r", {"seq": 2}, b)  # the lost b's lease passes the fence
            assert [e["seq"] for e in new.load("r")] == [0, 1, 2]


@pytest.mark.clause("P16")
def test_open_store_takes_every_libpq_spelling(pg_url: str, schema: str) -> None:
    """P16 (intake): multi-host with ports, host-less, ?host= lists, key=value."""
    tail = pg_url.split("://", 1)[1]
    userinfo, _, rest = tail.rpartition("@")
    hostport, _, database = rest.partition("/")
    host, _, port = hostport.partition(":")
    port = port or "5432"
    user = userinfo.split(":", 1)[0] or "postgres"
    refused = "127.0.0.1:9"  # nothing listens: the next host serves
    spellings = [
        f"postgresql://{user}@{refused},{host}:{port}/{database}",
        f"postgresql:///{database}?host={host}&port={port}&user={user}",
        f"postgresql://{user}@/{database}?host=127.0.0.1,{host}&port=9,{port}",
        f"host={host} port={port} user={user} dbname={database}",
    ]
    for spelling in spellings:
        with open_store(spelling, schema=schema) as opened:
            opened.journal.append("r", {"seq": 0})
            assert opened.journal.load("r") == [{"seq": 0}]
            opened.journal.delete("r")

    async def through_asyncio(spelling: str) -> list[Any]:
        async with open_store_async(spelling, schema=schema) as opened:
            await opened.journal.append("r", {"seq": 1})
            loaded = await opened.journal.load("r")
            await opened.journal.delete("r")
            return loaded

    for spelling in (spellings[0], spellings[-1]):
        assert asyncio.run(through_asyncio(spelling)) == [{"seq": 1}]


@pytest.mark.clause("P16")
@pytest.mark.parametrize("raw", ["#", "/", "?", "@"])
def test_no_error_or_chained_cause_carries_a_piece_of_the_password(raw: str) -> None:
    """P11/P16: the refusal of a raw reserved character quotes and chains nothing of it."""
    password = f"Pw{raw}Secret99"
    url = f"postgresql://u:{password}@127.0.0.1:5432,127.0.0.1:5433/db"
    openers: list[Callable[[], object]] = [
        lambda: PostgresStore(url),
        lambda: open_store(url).journal,
    ]
    for opener in openers:
        with pytest.raises(ConfigError) as caught:
            opener()
        chain: list[BaseException] = []
        error: BaseException | None = caught.value
        while error is not None and len(chain) < 10:
            chain.append(error)
            error = error.__cause__ or error.__context__
        text = " ".join(f"{exc!s} {exc!r}" for exc in chain)
        assert "Secret99" not in text, text
        assert "percent-encode" in str(caught.value)


@pytest.mark.clause("P20")
def test_rulvar_check_shows_the_replication_mode(pg_url: str) -> None:
    """P20: the line ``rulvar check`` prints before its suites (``rulvar_cli._durability``).

    Read through the backend's own certify locations, as the command reads it
    (the command itself then spends half a minute in its suites).
    """
    parsed = parse_store_url(pg_url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        found = durability_of(locations)
    assert found is not None
    assert found["replication"] == "async"
    assert durability_line(found).startswith(
        "durability: synchronous_commit=on; replication async (synchronous_commit=on"
    )
