"""K9 self-tests: the worker in-process with an injected kill, config and report handling."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, cast

import pytest

from rulvar_conformance.kill_points.driver import ScriptedProvider, run_segment
from rulvar_conformance.kill_points.scenarios import (
    KILL_POINT_SCENARIOS,
    KillPointScenario,
)
from rulvar_conformance.kill_points.worker import (
    CONFIG_ENV,
    KillPointWorkerConfig,
    decode_opener,
    encode_opener,
    kill_point_worker_config_from_env,
    read_report,
    run_kill_point_worker,
)
from rulvar_store import LeasableStore, MemoryStore, OpenedStore
from rulvar_store.backend import UrlOpener, system_clock_ms

TTL_MS = 2_000


class SimulatedKill(BaseException):
    """Unwinds the in-process worker the way SIGKILL ends a child: no cleanup."""


def die() -> None:
    raise SimulatedKill


def run_in_process(
    scenario: KillPointScenario, tmp_path: Path
) -> tuple[MemoryStore, list[dict[str, Any]]]:
    store = MemoryStore(ttl_ms=TTL_MS)
    opened = OpenedStore(journal=store, transcripts=store.transcripts())
    config = KillPointWorkerConfig(
        store_path="memory",
        run_id=f"kp-{scenario.id}",
        ttl_ms=TTL_MS,
        report_path=str(tmp_path / "report.jsonl"),
        scenario_id=scenario.id,
    )
    with pytest.raises(SimulatedKill):
        run_kill_point_worker(opened, config, kill=die)
    return store, read_report(config.report_path)


@pytest.mark.clause("K9")
def test_ten_unique_scenarios_cover_both_brackets_of_five_points() -> None:
    """The table has ten unique ids: before and after each of the five writes."""
    assert len({s.id for s in KILL_POINT_SCENARIOS}) == 10
    points = ("running", "ok-terminal", "limit-terminal", "settle", "meta")
    expected = set(itertools.product(points, ("before", "after")))
    assert {(s.point, s.phase) for s in KILL_POINT_SCENARIOS} == expected


@pytest.mark.clause("K9")
@pytest.mark.parametrize("scenario", KILL_POINT_SCENARIOS, ids=lambda s: s.id)
def test_in_process_worker_dies_at_its_write_and_resumes_per_the_table(
    scenario: KillPointScenario, tmp_path: Path
) -> None:
    """One kill event at the scenario's point/phase, the child spend, then the resume spend."""
    store, events = run_in_process(scenario, tmp_path)
    kills = [e for e in events if e["t"] == "kill"]
    assert len(kills) == 1
    assert (kills[0]["point"], kills[0]["phase"]) == (scenario.point, scenario.phase)
    calls = sum(1 for e in events if e["t"] == "call")
    tools = sum(1 for e in events if e["t"] == "tool")
    assert (calls, tools) == (scenario.child_calls, scenario.child_tools)
    assert not [e for e in events if e["t"] in ("ran-to-completion", "fatal")]
    # The resume: a second handle whose clock is past the dead worker's lease.
    resumer = MemoryStore.sharing(store, now=lambda: system_clock_ms() + TTL_MS + 1)
    provider = ScriptedProvider()
    outcome = run_segment(
        cast(LeasableStore, resumer),
        resumer.transcripts(),
        f"kp-{scenario.id}",
        scenario.workflow,
        provider,
    )
    assert outcome.value == dict(scenario.value)
    assert (provider.calls, provider.tool_runs) == (
        scenario.resume_calls,
        scenario.resume_tools,
    )


@pytest.mark.clause("K9")
def test_before_settle_leaves_both_steps_durable_no_settle_and_meta_running(
    tmp_path: Path,
) -> None:
    """Killed before the settle: two complete pairs, no run_settle, meta still running."""
    scenario = next(s for s in KILL_POINT_SCENARIOS if s.id == "happy-settle-before")
    store, _ = run_in_process(scenario, tmp_path)
    run_id = f"kp-{scenario.id}"
    assert [f"{e['kind']}:{e['status']}" for e in store.load(run_id)] == [
        "agent:running",
        "agent:ok",
        "agent:running",
        "agent:ok",
    ]
    meta = store.get_meta(run_id)
    assert meta is not None
    assert meta["status"] == "running"


@pytest.mark.clause("K9")
def test_after_terminal_logs_the_seq_of_the_durable_write(tmp_path: Path) -> None:
    """Killed after the ok terminal: the kill event names its kind, status and seq."""
    scenario = next(
        s for s in KILL_POINT_SCENARIOS if s.id == "happy-ok-terminal-after"
    )
    store, events = run_in_process(scenario, tmp_path)
    (kill,) = [e for e in events if e["t"] == "kill"]
    assert (kill["site"], kill["kind"], kill["status"], kill["seq"]) == (
        "append",
        "agent",
        "ok",
        3,
    )
    assert store.load(f"kp-{scenario.id}")[-1]["seq"] == 3


@pytest.mark.clause("K5")
def test_config_round_trips_through_the_environment() -> None:
    """The config survives RULVAR_KILL_POINT_CONFIG, the opener its pickling."""
    opener = UrlOpener("sqlite:////tmp/x.db", {"busy_timeout_ms": 100})
    config = KillPointWorkerConfig(
        store_path="/tmp/x.db",
        run_id="kp-happy-running-before",
        ttl_ms=2_000,
        report_path="/tmp/r.jsonl",
        scenario_id="happy-running-before",
        opener=encode_opener(opener),
    )
    back = kill_point_worker_config_from_env({CONFIG_ENV: config.to_env()})
    assert back == config
    assert decode_opener(back.opener) == opener


@pytest.mark.clause("K5")
def test_a_closure_opener_travels_through_dill() -> None:
    """An opener plain pickle refuses (a closure) is shipped with dill."""
    marker = "closure"

    def opener(ttl_ms: int | None, now: Any, fail_fast: bool) -> Any:
        return (marker, ttl_ms)

    decoded: Any = decode_opener(encode_opener(opener))
    assert decoded(5, None, False) == ("closure", 5)


@pytest.mark.clause("K5")
def test_unknown_scenario_raises_before_any_store_call(tmp_path: Path) -> None:
    """An unknown scenario id raises KeyError and the store stays untouched."""
    store = MemoryStore()
    config = KillPointWorkerConfig(
        "memory", "kp-x", TTL_MS, str(tmp_path / "r.jsonl"), "no-such-scenario"
    )
    with pytest.raises(KeyError, match="no-such-scenario"):
        run_kill_point_worker(
            OpenedStore(journal=store, transcripts=store.transcripts()), config
        )
    assert store.list_runs() == []


@pytest.mark.clause("K9")
def test_a_torn_last_report_line_is_tolerated(tmp_path: Path) -> None:
    """A report whose last line was cut by the kill yields the complete events."""
    path = tmp_path / "report.jsonl"
    path.write_text(json.dumps({"t": "call", "prompt": "step one"}) + '\n{"t": "ki')
    assert read_report(str(path)) == [{"t": "call", "prompt": "step one"}]


@pytest.mark.clause("K9")
def test_a_torn_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    """Only the last line may be torn; a bad line before it is not a crash residue."""
    path = tmp_path / "report.jsonl"
    path.write_text('{"t": "ca\n' + json.dumps({"t": "tool", "target": "t1"}) + "\n")
    with pytest.raises(json.JSONDecodeError):
        read_report(str(path))
