"""PostgreSQL's fused writes: ``in_brief_lease``, ``put_with_meta``, ``put_meta_and_release``.

The LangGraph saver makes an unheld write's brief lease, starts a thread with
its meta and ends a hold with its outcome through them, each in one
transaction. Each keeps every guarantee of the calls it replaces: the
acquire's refusal (naming the holder), its takeover of an expired lease or a
dead holder's, the epoch that fences out earlier leases, the fence on every
write, and all or nothing. Sync and asyncio stores alike.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from rulvar_conformance import ManualClock
from rulvar_store import (
    InvalidArgumentError,
    Lease,
    LeaseHeldError,
    LeaseRunMismatchError,
    NotJsonError,
)
from rulvar_store.backend import Failpoint, set_failpoint_hook
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

pytestmark = pytest.mark.postgres

TTL_MS = 60_000
REF = "run/c/n/x/z"


def _meta(run_id: str, status: str) -> dict[str, object]:
    return {"runId": run_id, "status": status, "updatedAt": "t"}


def _lease_row(admin: psycopg.Connection[Any], schema: str) -> Any:
    return admin.execute(
        f'SELECT owner, epoch FROM "{schema}".rulvar_leases WHERE run_id = %s',
        ("run",),
    ).fetchone()


@pytest.fixture
def recorded() -> Iterator[list[tuple[str, str]]]:
    """Every failpoint a store passes, as (operation, point)."""
    seen: list[tuple[str, str]] = []

    def hook(operation: str, point: Failpoint) -> None:
        seen.append((operation, point))

    previous = set_failpoint_hook(hook)
    try:
        yield seen
    finally:
        set_failpoint_hook(previous)


def _commits(seen: list[tuple[str, str]]) -> list[str]:
    return [operation for operation, point in seen if point == "after-commit"]


# -- in_brief_lease (L14) ------------------------------------------------------


@pytest.mark.clause("L14")
def test_a_brief_lease_is_refused_while_another_holds(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    """The acquire's refusal: holder, epoch and retry_after_ms; the work never runs."""
    store = make_store(ttl_ms=TTL_MS)
    held = store.acquire("run", "holder")
    ran: list[bool] = []
    with pytest.raises(LeaseHeldError) as refused:
        store.in_brief_lease("run", "brief", lambda lease, j, b: ran.append(True))
    assert ran == []
    assert (refused.value.holder, refused.value.epoch) == ("holder", held.epoch)
    assert refused.value.retry_after_ms is not None
    assert 0 < refused.value.retry_after_ms <= TTL_MS
    assert _lease_row(admin, schema) == ("holder", held.epoch)
    store.renew(held)  # the holder's lease is untouched and still its own


@pytest.mark.clause("L14")
def test_a_brief_lease_fences_out_an_earlier_lease_in_one_commit(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
    recorded: list[tuple[str, str]],
) -> None:
    """An expired lease is taken over, the epoch moves, one commit, no row after."""
    clock = ManualClock()
    store = make_store(ttl_ms=1_000, now=clock)
    blobs = store.transcripts()
    stale = store.acquire("run", "stalled")
    clock.advance(2_000)  # expired, never released: the holder stalled
    recorded.clear()

    def work(lease: Lease, journal: Any, twin: Any) -> int:
        twin.put(REF, b"brief", lease)
        assert twin.get(REF) == b"brief"  # the work reads its own writes
        assert twin.last_ref("run", "run/c/") == REF
        journal.put_meta(_meta("run", "running"), lease)
        return lease.epoch

    epoch = store.in_brief_lease("run", "brief", work)
    assert _commits(recorded) == ["in_brief_lease"]
    assert epoch == stale.epoch + 1
    assert _lease_row(admin, schema) is None
    assert blobs.get(REF) == b"brief"
    assert store.get_meta("run") == _meta("run", "running")
    with pytest.raises(LeaseHeldError):  # the stalled holder can change nothing
        blobs.put(REF, b"stale", stale)
    assert blobs.get(REF) == b"brief"
    assert store.acquire("run", "next").epoch == epoch + 1


@pytest.mark.clause("L14")
def test_a_brief_lease_is_all_or_nothing(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    """Work that fails after a write, or writes with another lease, leaves nothing."""
    store = make_store(ttl_ms=TTL_MS)
    blobs = store.transcripts()

    def fails_after_a_put(lease: Lease, journal: Any, twin: Any) -> None:
        twin.put(REF, b"lost", lease)
        journal.put_meta(_meta("run", "lost"), lease)
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError, match="the work failed"):
        store.in_brief_lease("run", "brief", fails_after_a_put)
    forged = Lease("run", "someone-else", 99)

    def writes_with_another_lease(lease: Lease, journal: Any, twin: Any) -> None:
        twin.put("run/c/n/y/z", b"first", lease)
        twin.put("run/c/n/y/z", b"forged", forged)

    with pytest.raises(LeaseHeldError):
        store.in_brief_lease("run", "brief", writes_with_another_lease)

    def writes_unleased(lease: Lease, journal: Any, twin: Any) -> None:
        twin.put("run/c/n/y/z", b"first", lease)
        twin.put("run/c/n/y/z", b"unfenced")

    with pytest.raises(LeaseHeldError, match="must carry"):
        store.in_brief_lease("run", "brief", writes_unleased)

    def writes_another_run(lease: Lease, journal: Any, twin: Any) -> None:
        twin.put("other/c/n/y/z", b"elsewhere", lease)

    with pytest.raises(LeaseRunMismatchError):
        store.in_brief_lease("run", "brief", writes_another_run)
    assert blobs.list_refs("run") == []
    assert blobs.list_refs("other") == []
    assert store.get_meta("run") is None
    assert _lease_row(admin, schema) is None
    # Every failed brief lease rolled its epoch back too: the next is the first.
    assert store.acquire("run", "next").epoch == 1


CHILD = """
import sys, time
from rulvar_store_postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2], ttl_ms=int(sys.argv[3]))
store.acquire("run", "child-holder")
print("held", flush=True)
time.sleep(3600)
"""


@pytest.mark.clause("L14")
def test_a_brief_lease_takes_a_killed_holders_run_at_once(
    make_store: Callable[..., PostgresStore], pg_url: str, schema: str
) -> None:
    """L11 through the brief lease: a stopped holder is alive, a killed one is not."""
    store = make_store(ttl_ms=TTL_MS)
    store.get_meta("run")  # booted before the child uses the schema
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, pg_url, schema, str(TTL_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        child.send_signal(signal.SIGSTOP)
        with pytest.raises(LeaseHeldError):
            store.in_brief_lease("run", "brief", lambda lease, j, b: lease.epoch)
        child.kill()
        child.wait()
        epoch = None
        for _ in range(500):  # the server ends the dead session's locks promptly
            try:
                epoch = store.in_brief_lease(
                    "run", "brief", lambda lease, j, b: lease.epoch
                )
                break
            except LeaseHeldError:
                time.sleep(0.02)
        assert epoch == 2
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


@pytest.mark.clause("L14")
def test_the_asyncio_store_awaits_its_work_in_one_transaction(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """Refused while held, fences out an expired lease, rolls a failed work back."""
    clock = ManualClock()

    async def main() -> None:
        store = AsyncPostgresStore(pg_url, schema=schema, ttl_ms=1_000, now=clock)
        try:
            blobs = store.transcripts()
            held = await store.acquire("run", "holder")
            ran: list[bool] = []

            async def note(lease: Lease, journal: Any, twin: Any) -> None:
                ran.append(True)

            with pytest.raises(LeaseHeldError) as refused:
                await store.in_brief_lease("run", "brief", note)
            assert (ran, refused.value.holder) == ([], "holder")
            clock.advance(2_000)

            async def work(lease: Lease, journal: Any, twin: Any) -> int:
                await journal.put_with_meta(REF, b"a", _meta("run", "running"), lease)
                assert await twin.get_under("run", "run/c/n/x/") == [(REF, b"a")]
                return lease.epoch

            epoch = await store.in_brief_lease("run", "brief", work)
            assert epoch == held.epoch + 1
            with pytest.raises(LeaseHeldError):
                await blobs.put(REF, b"stale", held)

            async def fails(lease: Lease, journal: Any, twin: Any) -> None:
                await twin.delete(REF, lease)
                await journal.delete("run", lease)
                raise RuntimeError("the work failed")

            with pytest.raises(RuntimeError, match="the work failed"):
                await store.in_brief_lease("run", "brief", fails)
            assert await blobs.get(REF) == b"a"
            assert await store.get_meta("run") == _meta("run", "running")
            assert (await store.acquire("run", "next")).epoch == epoch + 1
        finally:
            await store.aclose()

    asyncio.run(main())
    assert _lease_row(admin, schema) is not None  # "next" still holds it


# -- put_with_meta and put_meta_and_release (L15) ---------------------------------


@pytest.mark.clause("L15")
def test_put_meta_and_release_is_one_transaction_and_frees_the_run(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
    recorded: list[tuple[str, str]],
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    lease = store.acquire("run", "w")
    recorded.clear()
    store.put_meta_and_release(_meta("run", "ok"), lease)
    assert _commits(recorded) == ["put_meta_and_release"]
    assert store.get_meta("run") == _meta("run", "ok")
    assert _lease_row(admin, schema) is None
    assert store.acquire("run", "next").epoch == lease.epoch + 1


@pytest.mark.clause("L15")
def test_a_superseded_lease_changes_nothing_with_either(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    clock = ManualClock()
    store = make_store(ttl_ms=1_000, now=clock)
    blobs = store.transcripts()
    stale = store.acquire("run", "a")
    store.put_meta(_meta("run", "running"), stale)
    clock.advance(2_000)
    live = store.acquire("run", "b")
    with pytest.raises(LeaseHeldError):
        store.put_meta_and_release(_meta("run", "ok"), stale)
    with pytest.raises(LeaseHeldError):
        store.put_with_meta(REF, b"late", _meta("run", "error"), stale)
    assert store.get_meta("run") == _meta("run", "running")
    assert blobs.get(REF) is None
    assert _lease_row(admin, schema) == ("b", live.epoch)


@pytest.mark.clause("L15")
def test_put_with_meta_lands_both_or_neither(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    blobs = store.transcripts()
    lease = store.acquire("run", "w")
    store.put_with_meta(REF, b"first", _meta("run", "running"), lease)
    assert blobs.get(REF) == b"first"
    assert store.get_meta("run") == _meta("run", "running")
    with pytest.raises(LeaseRunMismatchError):
        store.put_with_meta("run/c/n/y/z", b"b", _meta("other", "x"), lease)
    with pytest.raises(NotJsonError):
        store.put_with_meta(
            "run/c/n/y/z", b"b", {"runId": "run", "status": object()}, lease
        )
    assert blobs.get("run/c/n/y/z") is None
    assert store.get_meta("run") == _meta("run", "running")
    store.release(lease)


@pytest.mark.clause("L15")
def test_the_asyncio_store_offers_both(pg_url: str, schema: str) -> None:
    async def main() -> None:
        store = AsyncPostgresStore(pg_url, schema=schema, ttl_ms=TTL_MS)
        try:
            lease = await store.acquire("run", "w")
            await store.put_with_meta(REF, b"blob", _meta("run", "running"), lease)
            await store.put_meta_and_release(_meta("run", "ok"), lease)
            assert await store.get_meta("run") == _meta("run", "ok")
            assert await store.transcripts().get(REF) == b"blob"
            assert await store.peek_lease("run") is None
            with pytest.raises(LeaseHeldError):  # released: no longer live
                await store.put_meta_and_release(_meta("run", "late"), lease)
            assert await store.get_meta("run") == _meta("run", "ok")
        finally:
            await store.aclose()

    asyncio.run(main())


# -- the LangGraph saver over PostgreSQL ---------------------------------------


@pytest.mark.clause("L16")
def test_an_unheld_langgraph_put_is_one_commit(
    pg_url: str,
    schema: str,
    admin: psycopg.Connection[Any],
    recorded: list[tuple[str, str]],
) -> None:
    """The saver's unheld put (brief lease, newest read, checkpoint) is one call."""
    from langgraph.checkpoint.base import empty_checkpoint

    from rulvar_langgraph import RulvarSaver

    with RulvarSaver.from_url(pg_url, owner="w", schema=schema) as saver:
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for step in range(3):
            recorded.clear()
            stored = saver.put(config, empty_checkpoint(), {"step": step}, {})
            assert _commits(recorded) == ["brief_put"]
            config = {
                "configurable": {**config["configurable"], **stored["configurable"]}
            }
        held = saver.journal.acquire("t", "other")  # type: ignore[attr-defined]  # PG leases
        with pytest.raises(LeaseHeldError):
            saver.put(config, empty_checkpoint(), {"step": 9}, {})
        with pytest.raises(LeaseHeldError):  # through in_brief_lease
            saver.put_writes(config, [("ch", 1)], "task-1")
        saver.journal.release(held)  # type: ignore[attr-defined]  # PG leases
        recorded.clear()
        saver.put_writes(config, [("ch", 1)], "task-1")
        assert _commits(recorded) == ["in_brief_lease"]
        found = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert found is not None
        assert found.metadata["step"] == 2
    rows = admin.execute(f'SELECT count(*) FROM "{schema}".rulvar_leases').fetchone()
    assert rows == (0,)


@pytest.mark.clause("L14", "L16")
def test_an_unheld_async_langgraph_put_is_one_commit(
    pg_url: str, schema: str, recorded: list[tuple[str, str]]
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from rulvar_langgraph import AsyncRulvarSaver

    async def main() -> None:
        async with AsyncRulvarSaver.from_url(pg_url, owner="w", schema=schema) as saver:
            config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            for step in range(3):
                recorded.clear()
                stored = await saver.aput(
                    config, empty_checkpoint(), {"step": step}, {}
                )
                assert _commits(recorded) == ["brief_put"]
                config = {
                    "configurable": {
                        **config["configurable"],
                        **stored["configurable"],
                    }
                }
            await saver.aput_writes(config, [("ch", 1)], "task-1")
            assert _commits(recorded)[-1] == "in_brief_lease"
            found = await saver.aget_tuple({"configurable": {"thread_id": "t"}})
            assert found is not None
            assert found.metadata["step"] == 2
            assert [write[1:] for write in found.pending_writes or []] == [("ch", 1)]

    asyncio.run(main())


# -- brief_put (L16) ---------------------------------------------------------------

TAIL = "^[^/]+(/z)?$"  # a checkpoint's ref past its namespace: id, maybe its leaf


def _brief_put(store: PostgresStore, ref: str, **options: Any) -> bool:
    options.setdefault("meta", None)
    return store.brief_put(
        "brief",
        ref,
        b"data:" + ref.encode(),
        options.pop("under", "run/c/n/"),
        options.pop("tail", TAIL),
        options.pop("meta"),
        options.pop("meta_replaces", True),
        options.pop("need_prior", False),
    )


@pytest.mark.clause("L16")
def test_brief_put_is_an_acquire_a_put_and_a_release_in_one_call(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
    recorded: list[tuple[str, str]],
) -> None:
    """Refused while held (naming the holder), else the epoch moves and no row stays."""
    clock = ManualClock()
    store = make_store(ttl_ms=1_000, now=clock)
    blobs = store.transcripts()
    held = store.acquire("run", "holder")
    with pytest.raises(LeaseHeldError) as refused:
        _brief_put(store, "run/c/n/1/z", meta=_meta("run", "running"))
    assert (refused.value.holder, refused.value.epoch) == ("holder", held.epoch)
    assert refused.value.retry_after_ms == 1_000
    assert blobs.get("run/c/n/1/z") is None
    assert store.get_meta("run") is None
    clock.advance(2_000)  # the holder stalled: its lease expired
    recorded.clear()
    assert _brief_put(store, "run/c/n/1/z", meta=_meta("run", "running"))
    assert _commits(recorded) == ["brief_put"]
    assert _lease_row(admin, schema) is None
    assert blobs.get("run/c/n/1/z") == b"data:run/c/n/1/z"
    assert store.get_meta("run") == _meta("run", "running")
    with pytest.raises(LeaseHeldError):  # fenced out by the brief lease's epoch
        blobs.put("run/c/n/1/z", b"stale", held)
    assert store.acquire("run", "next").epoch == held.epoch + 2


@pytest.mark.clause("L16")
def test_brief_put_writes_the_meta_only_where_nothing_was_prior(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    # A write's ref under the prefix is not a checkpoint: nothing counts as prior.
    store.transcripts().put("run/c/n/1/w/task", b"write")
    assert _brief_put(store, "run/c/n/1/z", meta=_meta("run", "first"))
    assert store.get_meta("run") == _meta("run", "first")
    # A checkpoint is prior now: the meta is left alone.
    assert _brief_put(store, "run/c/n/2/z", meta=_meta("run", "second"))
    assert store.get_meta("run") == _meta("run", "first")
    # In another namespace nothing is prior, but meta_replaces=False keeps it.
    assert _brief_put(
        store,
        "run/c/m/1/z",
        under="run/c/m/",
        meta=_meta("run", "third"),
        meta_replaces=False,
    )
    assert store.get_meta("run") == _meta("run", "first")


@pytest.mark.clause("L16")
def test_brief_put_that_needs_a_prior_ref_and_finds_none_changes_nothing(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    before = store.acquire("run", "w")
    store.release(before)
    assert not _brief_put(store, "run/c/n/1/z", need_prior=True, meta=_meta("run", "x"))
    assert store.transcripts().list_refs("run") == []
    assert store.get_meta("run") is None
    assert _lease_row(admin, schema) is None
    assert store.acquire("run", "next").epoch == before.epoch + 1  # unmoved
    with pytest.raises(InvalidArgumentError):  # the prefix must be of the ref's run
        _brief_put(store, "run/c/n/1/z", under="other/c/n/")


@pytest.mark.clause("L16")
def test_the_asyncio_brief_put(pg_url: str, schema: str) -> None:
    async def main() -> None:
        store = AsyncPostgresStore(pg_url, schema=schema, ttl_ms=TTL_MS)
        try:
            held = await store.acquire("run", "holder")
            args = ("run/c/n/1/z", b"a", "run/c/n/", TAIL, _meta("run", "r"))
            with pytest.raises(LeaseHeldError):
                await store.brief_put("brief", *args)
            await store.release(held)
            assert await store.brief_put("brief", *args)
            assert await store.get_meta("run") == _meta("run", "r")
            assert await store.peek_lease("run") is None
        finally:
            await store.aclose()

    asyncio.run(main())


# -- acquire_with_last_ref: a hold's acquire and first read, one round trip ----------


@pytest.mark.clause("L1", "L12", "T12")
def test_acquire_with_last_ref_is_an_acquire_then_a_read(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store(ttl_ms=TTL_MS)
    blobs = store.transcripts()
    store.get_meta("run")  # booted: the collation is known, the pipeline runs
    lease, newest = store.acquire_with_last_ref("run", "w", "run/c/n/")
    assert (lease.epoch, newest) == (1, None)
    blobs.put("run/c/n/1/z", b"a", lease)
    blobs.put("run/c/n/2/z", b"b", lease)
    blobs.put("run/c/m/9/z", b"c", lease)
    with pytest.raises(LeaseHeldError) as refused:
        store.acquire_with_last_ref("run", "other", "run/c/n/")
    assert (refused.value.holder, refused.value.epoch) == ("w", 1)
    store.release(lease)
    again, newest = store.acquire_with_last_ref("run", "w", "run/c/n/")
    assert (again.epoch, newest) == (2, "run/c/n/2/z")
    with pytest.raises(LeaseHeldError):  # the earlier lease is fenced out
        blobs.put("run/c/n/3/z", b"stale", lease)


@pytest.mark.clause("L1", "T12")
def test_the_asyncio_acquire_with_last_ref(pg_url: str, schema: str) -> None:
    async def main() -> None:
        store = AsyncPostgresStore(pg_url, schema=schema, ttl_ms=TTL_MS)
        try:
            await store.get_meta("run")
            lease, newest = await store.acquire_with_last_ref("run", "w", "run/c/n/")
            assert (lease.epoch, newest) == (1, None)
            await store.transcripts().put("run/c/n/1/z", b"a", lease)
            with pytest.raises(LeaseHeldError) as refused:
                await store.acquire_with_last_ref("run", "x", "run/c/n/")
            assert refused.value.holder == "w"
            await store.release(lease)
            again, newest = await store.acquire_with_last_ref("run", "x", "run/c/n/")
            assert (again.epoch, newest) == (2, "run/c/n/1/z")
        finally:
            await store.aclose()

    asyncio.run(main())


@pytest.mark.clause("L14")
def test_a_fault_before_the_brief_commit_leaves_nothing(
    make_store: Callable[..., PostgresStore],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    """The failpoints of the one transaction: a fault at before-commit rolls back whole."""
    store = make_store(ttl_ms=TTL_MS)
    seen: list[str] = []

    def hook(operation: str, point: Failpoint) -> None:
        if operation == "in_brief_lease":
            seen.append(point)
            if point == "before-commit":
                raise RuntimeError("killed before the commit")

    def work(lease: Lease, journal: Any, twin: Any) -> None:
        twin.put(REF, b"lost", lease)
        journal.put_meta(_meta("run", "lost"), lease)

    previous = set_failpoint_hook(hook)
    try:
        with pytest.raises(RuntimeError, match="killed before the commit"):
            store.in_brief_lease("run", "brief", work)
    finally:
        set_failpoint_hook(previous)
    assert seen == ["after-begin", "before-commit"]
    assert store.transcripts().get(REF) is None
    assert store.get_meta("run") is None
    assert _lease_row(admin, schema) is None
    assert store.acquire("run", "next").epoch == 1  # the epoch rolled back too
