"""SQLite's ``brief_put`` (L16) and the brief lease's takeover of a dead holder (L11, L14).

An unheld LangGraph ``put`` is one ``brief_put``: acquire, the put, a
starting thread's meta and release in one transaction. These check each of
those promises on the store itself; the saver's own behaviour is checked by
the LangGraph suites, which now run through it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance import ManualClock
from rulvar_store import InvalidArgumentError, LeaseHeldError, open_store_async
from rulvar_store.backend import this_process
from rulvar_store_sqlite import SqliteStore

TAIL = "^[^/]+(/z)?$"  # a checkpoint's ref past its namespace: id, maybe its leaf
TTL_MS = 60_000


def _meta(run_id: str, status: str) -> dict[str, object]:
    return {"runId": run_id, "status": status, "updatedAt": "t"}


def _brief_put(store: SqliteStore, ref: str, **options: Any) -> bool:
    return store.brief_put(
        "brief",
        ref,
        b"data:" + ref.encode(),
        options.pop("under", "run/c/n/"),
        options.pop("tail", TAIL),
        options.pop("meta", None),
        options.pop("meta_replaces", True),
        options.pop("need_prior", False),
    )


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "brief.db")


@pytest.mark.clause("L16", "L12")
def test_brief_put_is_an_acquire_a_put_and_a_release_in_one_commit(path: str) -> None:
    """Refused while held (naming the holder), else the epoch moves and no row stays."""
    clock = ManualClock()
    with SqliteStore(path, ttl_ms=1_000, now=clock) as store:
        blobs = store.transcripts()
        held = store.acquire("run", "holder")
        with pytest.raises(LeaseHeldError) as refused:
            _brief_put(store, "run/c/n/1/z", meta=_meta("run", "running"))
        assert (refused.value.holder, refused.value.epoch) == ("holder", held.epoch)
        assert refused.value.retry_after_ms == 1_000
        assert blobs.get("run/c/n/1/z") is None
        assert store.get_meta("run") is None
        clock.advance(2_000)  # the holder stalled: its lease expired
        before = store._door.batches
        assert _brief_put(store, "run/c/n/1/z", meta=_meta("run", "running"))
        assert store._door.batches == before + 1
        assert store.peek_lease("run") is None
        assert blobs.get("run/c/n/1/z") == b"data:run/c/n/1/z"
        assert store.get_meta("run") == _meta("run", "running")
        with pytest.raises(LeaseHeldError):  # fenced out by the brief lease's epoch
            blobs.put("run/c/n/1/z", b"stale", held)
        assert blobs.get("run/c/n/1/z") == b"data:run/c/n/1/z"
        assert store.acquire("run", "next").epoch == held.epoch + 2


@pytest.mark.clause("L16", "L6")
def test_brief_put_over_no_lease_row_spends_no_epoch_and_fences_all_the_same(
    path: str,
) -> None:
    """With no lease row no lease is live, and none can be again without an acquire
    (which bumps): the put spends no epoch, and released leases stay fenced out."""
    with SqliteStore(path, ttl_ms=TTL_MS) as store:
        blobs = store.transcripts()
        assert _brief_put(store, "run/c/n/1/z")  # a new run: no epoch at all
        first = store.acquire("run", "w")
        assert first.epoch == 1
        store.release(first)
        before = store._door.batches
        assert _brief_put(store, "run/c/n/2/z")
        assert store._door.batches == before + 1
        assert store.peek_lease("run") is None
        with pytest.raises(LeaseHeldError):  # released: never writes again (L6)
            blobs.put("run/c/n/2/z", b"stale", first)
        assert blobs.get("run/c/n/2/z") == b"data:run/c/n/2/z"
        assert store.acquire("run", "next").epoch == first.epoch + 1


@pytest.mark.clause("L16")
def test_brief_put_writes_the_meta_only_where_nothing_was_prior(path: str) -> None:
    with SqliteStore(path, ttl_ms=TTL_MS) as store:
        # A write's ref under the prefix is not a checkpoint: nothing counts as prior.
        store.transcripts().put("run/c/n/1/w/task", b"write")
        assert _brief_put(store, "run/c/n/1/z", meta=_meta("run", "first"))
        assert store.get_meta("run") == _meta("run", "first")
        # A checkpoint is prior now (found past the range's least ref, a write).
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
        # A ref that only shares the prefix's text is no prior of another namespace.
        store.transcripts().put("run/c/n2/1/z", b"elsewhere")
        assert _brief_put(
            store, "run/c/n3/1/z", under="run/c/n3/", meta=_meta("run", "fourth")
        )
        assert store.get_meta("run") == _meta("run", "fourth")


@pytest.mark.clause("L16")
def test_brief_put_that_needs_a_prior_ref_and_finds_none_changes_nothing(
    path: str,
) -> None:
    with SqliteStore(path, ttl_ms=TTL_MS) as store:
        before = store.acquire("run", "w")
        store.release(before)
        assert not _brief_put(
            store, "run/c/n/1/z", need_prior=True, meta=_meta("run", "x")
        )
        assert store.transcripts().list_refs("run") == []
        assert store.get_meta("run") is None
        assert store.peek_lease("run") is None
        assert store.acquire("run", "next").epoch == before.epoch + 1  # unmoved


@pytest.mark.clause("L16")
@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"under": "other/c/n/"}, "prefix"),
        ({"tail": "^[^/"}, "tail"),
        ({"meta": {"runId": "other", "status": "x"}}, "meta"),
    ],
    ids=["prefix-of-another-run", "not-a-regex", "meta-of-another-run"],
)
def test_brief_put_refuses_bad_arguments_before_any_write(
    path: str, options: dict[str, Any], argument: str
) -> None:
    with SqliteStore(path, ttl_ms=TTL_MS) as store:
        with pytest.raises(InvalidArgumentError) as refused:
            _brief_put(store, "run/c/n/1/z", **options)
        assert refused.value.argument == argument
        assert store.transcripts().list_refs("run") == []
        assert store.acquire("run", "w").epoch == 1  # no epoch was spent


@pytest.mark.clause("L16")
def test_the_asyncio_brief_put(path: str) -> None:
    async def main() -> None:
        async with open_store_async(f"sqlite:///{path}") as opened:
            store: Any = opened.journal
            held = await store.acquire("run", "holder")
            args = ("run/c/n/1/z", b"a", "run/c/n/", TAIL, _meta("run", "r"))
            with pytest.raises(LeaseHeldError):
                await store.brief_put("brief", *args)
            await store.release(held)
            assert await store.brief_put("brief", *args)
            assert await store.get_meta("run") == _meta("run", "r")
            assert await opened.transcripts.get("run/c/n/1/z") == b"a"
            # No lease row stayed, and with none to replace no epoch was spent.
            assert (await store.acquire("run", "next")).epoch == held.epoch + 1

    asyncio.run(main())


HOLDER = """
import sys, time
from rulvar_store_sqlite import SqliteStore
store = SqliteStore(sys.argv[1], ttl_ms=int(sys.argv[2]))
store.acquire("run", "child-holder")
print("held", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def holder(path: str) -> Iterator[subprocess.Popen[str]]:
    """A child process that took the run's lease (60 s ttl) and sleeps."""
    SqliteStore(path).close()  # booted before the child opens it
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, str(TTL_MS)],
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


# A host without /proc cannot prove a holder dead (L11 reads every holder as
# alive there, by design), so the takeover this checks cannot happen; as in
# tests/core/test_liveness.py. On Linux, CI included, it always runs.
needs_proc = pytest.mark.skipif(
    this_process() is None, reason="no /proc: every holder reads as alive here"
)


@needs_proc
@pytest.mark.clause("L11", "L14", "L16")
@pytest.mark.parametrize("call", ["brief_put", "in_brief_lease"])
def test_a_brief_lease_takes_a_killed_holders_run_at_once(
    path: str, holder: subprocess.Popen[str], call: str
) -> None:
    """A stopped holder is alive and refuses; a killed one's live lease is taken over."""

    def brief(store: SqliteStore) -> int:
        if call == "brief_put":
            assert _brief_put(store, "run/c/n/1/z")
        else:
            store.in_brief_lease("run", "brief", lambda lease, j, b: None)
        return store.acquire("run", "after").epoch

    with SqliteStore(path, ttl_ms=TTL_MS) as store:
        holder.send_signal(signal.SIGSTOP)
        os.waitpid(holder.pid, os.WUNTRACED)
        with pytest.raises(LeaseHeldError) as refused:
            brief(store)
        assert refused.value.holder == "child-holder"
        holder.kill()
        holder.wait()
        # At once, with 60 s of the dead holder's ttl left: the brief lease
        # took epoch 2 and left no row, so the next acquire gets epoch 3.
        assert brief(store) == 3
