"""The reference run driver over the memory store: dispatch, settle, failure posture."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, cast

import pytest

from rulvar_conformance.kill_points.driver import (
    KP_HAPPY,
    KP_LIMIT,
    ScriptedProvider,
    prompt_key,
    run_segment,
)
from rulvar_store import (
    LeasableStore,
    Lease,
    LeaseHeldError,
    MemoryStore,
    SettlementError,
    StoreUnavailableError,
    SupersededError,
)

RUN = "kp-unit"


def kinds(store: MemoryStore) -> list[str]:
    return [f"{e['kind']}:{e['status']}" for e in store.load(RUN)]


def settles(store: MemoryStore) -> list[Any]:
    return [
        e["value"]["runStatus"]
        for e in store.load(RUN)
        if e["kind"] == "decision" and e["value"].get("decisionType") == "run_settle"
    ]


def drive(store: Any, workflow: str = KP_HAPPY) -> tuple[Any, ScriptedProvider]:
    provider = ScriptedProvider()
    outcome = run_segment(
        cast(LeasableStore, store), store.transcripts(), RUN, workflow, provider
    )
    return outcome, provider


class Wrapped:
    """Delegates to a memory store; tests override single methods."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def is_settle(entry: dict[str, Any]) -> bool:
    value = entry.get("value")
    return isinstance(value, dict) and value.get("decisionType") == "run_settle"


def dispatched_limit_agent(store: MemoryStore) -> Lease:
    """Journal kp-limit's dispatch (seq 0, running) under a setup lease it returns."""
    lease = store.acquire(RUN, "setup")
    key = prompt_key("probe until the cap")
    store.append(
        RUN, {"seq": 0, "kind": "agent", "status": "running", "key": key}, lease
    )
    return lease


def meta_status(store: MemoryStore) -> Any:
    meta = store.get_meta(RUN)
    assert meta is not None
    return meta["status"]


def settle_append_raises(store: MemoryStore, error: Exception) -> Wrapped:
    """``store`` whose run-settle append raises ``error``; other appends land."""
    broken = Wrapped(store)

    def append(run_id: str, entry: dict[str, Any], lease: Any = None) -> None:
        if is_settle(entry):
            raise error
        store.append(run_id, entry, lease)

    broken.append = append  # type: ignore[attr-defined]  # instance override
    return broken


def terminal_meta_raises(store: MemoryStore, error: Exception) -> Wrapped:
    """``store`` whose terminal (not running) meta write raises ``error``."""
    broken = Wrapped(store)

    def put_meta(meta: dict[str, Any], lease: Any = None) -> None:
        if meta["status"] != "running":
            raise error
        store.put_meta(meta, lease)

    broken.put_meta = put_meta  # type: ignore[attr-defined]  # instance override
    return broken


@pytest.mark.clause("K4")
def test_happy_run_returns_its_value_and_settles_before_the_terminal_meta() -> None:
    """kp-happy returns alpha/beta, journals two pairs and one ok settle, meta ok (K4, A7)."""
    store = MemoryStore()
    outcome, provider = drive(store)
    assert outcome.value == {"one": "alpha", "two": "beta"}
    assert provider.calls == 2
    assert kinds(store) == [
        "agent:running",
        "agent:ok",
        "agent:running",
        "agent:ok",
        "decision:ok",
    ]
    meta = store.get_meta(RUN)
    assert meta is not None
    assert (meta["status"], meta["segments"]) == ("ok", 1)
    assert [e["seq"] for e in store.load(RUN)] == [0, 1, 2, 3, 4]


@pytest.mark.clause("A8")
def test_pure_replay_of_a_settled_run_pays_nothing_and_appends_nothing() -> None:
    """A second segment replays every ok terminal: zero calls, no settle appended (K2, A8)."""
    store = MemoryStore()
    drive(store)
    before = store.load(RUN)
    outcome, provider = drive(store)
    assert provider.calls == 0
    assert outcome.value == {"one": "alpha", "two": "beta"}
    assert store.load(RUN) == before
    meta = store.get_meta(RUN)
    assert meta is not None
    assert (meta["status"], meta["segments"]) == ("ok", 2)


@pytest.mark.clause("K2")
def test_a_limit_terminal_in_a_never_settled_run_reruns_from_scratch() -> None:
    """An unstamped limit terminal reruns: new running entry, 3 calls, 2 tools (K2b)."""
    store = MemoryStore()
    lease = dispatched_limit_agent(store)
    store.append(RUN, {"seq": 1, "kind": "agent", "status": "limit", "ref": 0}, lease)
    store.release(lease)
    outcome, provider = drive(store, KP_LIMIT)
    assert outcome.value == {"agentStatus": "limit"}
    assert (provider.calls, provider.tool_runs) == (3, 2)
    assert kinds(store) == [
        "agent:running",
        "agent:limit",
        "agent:running",
        "agent:limit",
        "decision:ok",
    ]
    assert store.load(RUN)[3]["ref"] == 2


@pytest.mark.clause("K2")
def test_a_limit_terminal_in_a_run_settled_ok_replays() -> None:
    """Once the run settled ok, its limit terminal replays with zero calls (K2b)."""
    store = MemoryStore()
    drive(store, KP_LIMIT)
    outcome, provider = drive(store, KP_LIMIT)
    assert (provider.calls, provider.tool_runs) == (0, 0)
    assert outcome.value == {"agentStatus": "limit"}
    assert settles(store) == ["ok"]


@pytest.mark.clause("K2")
def test_a_dangling_dispatch_redispatches_from_its_checkpoint() -> None:
    """A running entry without terminal resumes from ckpt: 1 call, ref = original (K2c)."""
    store = MemoryStore()
    lease = dispatched_limit_agent(store)
    checkpoint = json.dumps({"turns": 2, "toolCallsUsed": 2}).encode()
    store.transcripts().put(f"{RUN}/ckpt/0", checkpoint, lease)
    store.release(lease)
    outcome, provider = drive(store, KP_LIMIT)
    assert (provider.calls, provider.tool_runs) == (1, 0)
    assert outcome.value == {"agentStatus": "limit"}
    terminal = store.load(RUN)[1]
    assert (terminal["status"], terminal["ref"]) == ("limit", 0)


@pytest.mark.clause("A8")
def test_a_failed_settle_append_heals_on_pure_replay() -> None:
    """Settle append fails: SettlementError('run-settle'), meta stays running; replay heals it."""
    store = MemoryStore()
    broken = settle_append_raises(store, StoreUnavailableError("disk gone", "append"))
    with pytest.raises(SettlementError) as caught:
        drive(broken)
    assert caught.value.stage == "run-settle"
    assert meta_status(store) == "running"
    assert settles(store) == []
    _, provider = drive(store)
    assert provider.calls == 0
    assert settles(store) == ["ok"]
    assert meta_status(store) == "ok"


@pytest.mark.clause("A9")
def test_a_fenced_settle_append_raises_superseded_and_skips_meta() -> None:
    """LeaseHeldError on the settle append: SupersededError, meta never written terminal."""
    store = MemoryStore()
    broken = settle_append_raises(store, LeaseHeldError("fenced", RUN, None, None))
    with pytest.raises(SupersededError) as caught:
        drive(broken)
    assert caught.value.run_status == "ok"
    assert meta_status(store) == "running"


@pytest.mark.clause("A9")
def test_a_fenced_terminal_meta_write_is_swallowed() -> None:
    """LeaseHeldError on the terminal meta: the journaled outcome stands, no error."""
    store = MemoryStore()
    broken = terminal_meta_raises(store, LeaseHeldError("fenced", RUN, None, None))
    outcome, _ = drive(broken)
    assert outcome.status == "ok"
    assert settles(store) == ["ok"]


@pytest.mark.clause("A9")
def test_a_failed_terminal_meta_write_raises_settlement_meta() -> None:
    """Any other terminal meta failure raises SettlementError('meta') after the settle."""
    store = MemoryStore()
    broken = terminal_meta_raises(store, StoreUnavailableError("disk gone", "put_meta"))
    with pytest.raises(SettlementError) as caught:
        drive(broken)
    assert caught.value.stage == "meta"
    assert settles(store) == ["ok"]


@pytest.mark.clause("K1")
def test_a_held_lease_refuses_the_segment_with_zero_writes() -> None:
    """Acquire on a live lease propagates LeaseHeldError; nothing written, nothing paid."""
    store = MemoryStore()
    store.acquire(RUN, "someone-else")
    with pytest.raises(LeaseHeldError):
        drive(store)
    assert store.load(RUN) == []
    assert store.get_meta(RUN) is None


@pytest.mark.clause("L10")
def test_a_failed_renew_cancels_before_the_next_provider_call() -> None:
    """When renew fails, the segment stops before its next paid call (K1, L10)."""
    store = MemoryStore(ttl_ms=30)
    broken = Wrapped(store)

    # The renew fails only once the first paid call is under way, and that call
    # returns only after the failure (plus a grace for the renewer to record it):
    # ordered by events, so a loaded machine cannot move the failure before it.
    call_started = threading.Event()
    renew_failed = threading.Event()

    def renew(lease: Any) -> None:
        call_started.wait(10)
        renew_failed.set()
        raise LeaseHeldError("superseded", RUN, None, None)

    broken.renew = renew  # type: ignore[attr-defined]  # instance override

    class SlowFirstCall:
        def call(self, prompt: str) -> None:
            call_started.set()
            renew_failed.wait(10)
            time.sleep(0.2)

        def tool(self, target: str) -> None:
            """The workflow under test calls no tool."""

    provider = ScriptedProvider(SlowFirstCall())
    with pytest.raises(LeaseHeldError):
        run_segment(
            cast(LeasableStore, broken), store.transcripts(), RUN, KP_HAPPY, provider
        )
    assert provider.calls == 1


@pytest.mark.clause("K3")
def test_the_scripted_provider_answers_and_counts() -> None:
    """step one -> alpha, step two -> beta, else a probe request; usage per K3."""
    provider = ScriptedProvider()
    assert provider.complete("step one", 1)["text"] == "alpha"
    assert provider.complete("step two", 1)["text"] == "beta"
    reply = provider.complete("probe until the cap", 3)
    assert (reply["tool"], reply["args"]) == ("probe", {"target": "t3"})
    assert reply["usage"] == {
        "inputTokens": 5,
        "outputTokens": 4,
        "cacheReadTokens": 0,
        "cacheWriteTokens": 0,
    }
    assert provider.probe("t3") == "evidence t3"
    assert (provider.calls, provider.tool_runs) == (3, 1)
