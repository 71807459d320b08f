"""Fault soaks on a private PostgreSQL cluster (S13 network, S14 server crashes).

Each soak starts its own cluster (initdb in a temporary folder) and never
touches the shared server. The network soak as writer hosts in network
namespaces needs root; without it that test skips with the reason (under
``CI=true`` it fails: CI runs as root). The loopback fault proxy runs anywhere.
The judge's own checks are held to records where the store misbehaved, so a
fault soak that cannot fail would be caught here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rulvar_conformance.faults.chaos import FaultPlan, ServerFaults
from rulvar_conformance.faults.judge import RECOVERY_S, judge_faults
from rulvar_conformance.faults.netns import netns_available
from rulvar_conformance.faults.pg_cluster import PrivateCluster, find_pg_bin, free_port
from rulvar_conformance.faults.profiles import fault_profile
from rulvar_conformance.faults.soak import run_fault_soak
from rulvar_store.backend import StoreLocation, UrlOpener
from tests._postgres_gate import in_ci
from tests.soak.seeded_defects import AcksWhenUnavailableOpener

pytestmark = pytest.mark.soak

NS = 1_000_000_000


def _need(reason: str | None) -> None:
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def _need_server_binaries() -> None:
    _need(None if find_pg_bin() else "no PostgreSQL server binaries (initdb, pg_ctl)")


@pytest.mark.clause("S13")
def test_network_faults_on_namespaced_hosts_through_the_cli(tmp_path: Path) -> None:
    """Quick network soak as root: holders cut off past their ttl, resets, no leak."""
    _need_server_binaries()
    _need(netns_available())
    summary_path = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "rulvar_cli", "soak",
            "postgresql://postgres@127.0.0.1:5432/test",
            "--faults", "network", "--profile", "quick",
            "--report", str(tmp_path / "report"), "--json", str(summary_path),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "fault: partitions / heals" in done.stdout
    summary = json.loads(summary_path.read_text())
    faults = summary["faults"]
    plan = fault_profile("network", "quick").plan
    assert summary["settings"]["faults"]["via"] == "network namespaces + veth"
    assert faults["partitions"]["of_a_holder_past_its_ttl"] >= plan.partitions
    assert faults["partitions"]["heals"] == faults["partitions"]["count"]
    # The storm waits for every healed writer to succeed again (quick has no kills).
    assert faults["partitions"]["recovered"] == faults["partitions"]["count"]
    assert "accept" not in faults["partitions"]["holder_calls_after_heal"] or (
        faults["partitions"]["taken_over_while_cut"] < faults["partitions"]["count"]
    )
    assert faults["resets"]["with_connections"] >= plan.resets
    assert faults["server_connections"]["leaked"] == 0
    assert summary["violations"] == []


@pytest.mark.clause("S13")
def test_network_faults_through_the_loopback_proxy(tmp_path: Path) -> None:
    """The fallback without namespaces: the same soak through a TCP fault proxy."""
    _need_server_binaries()
    profile = fault_profile("network", "quick")
    result = run_fault_soak(profile, report_dir=tmp_path, force_proxy=True)
    summary = result.summary
    assert summary.violations == (), summary.verdict_lines()
    assert summary.outcome == "passed", summary.verdict_lines()
    assert summary.settings["faults"]["via"] == "loopback TCP fault proxy"
    assert summary.faults["partitions"]["count"] >= profile.plan.partitions
    assert summary.faults["resets"]["with_connections"] >= profile.plan.resets
    partitions = summary.faults["partitions"]
    assert partitions["recovered"] == partitions["count"]
    assert summary.faults["server_connections"]["leaked"] == 0


@pytest.mark.clause("S14")
def test_server_crashes_keep_every_acknowledged_write(tmp_path: Path) -> None:
    """Quick server soak: the whole server SIGKILLed and restarted, twice."""
    _need_server_binaries()
    profile = fault_profile("server", "quick")
    result = run_fault_soak(profile, report_dir=tmp_path)
    summary = result.summary
    assert summary.outcome == "passed", summary.verdict_lines()
    server = summary.faults["server"]
    assert server["kills"] >= profile.plan.server_kills
    assert server["restarts"] == server["kills"]
    assert summary.faults["lost_acknowledged_writes"] == 0
    assert summary.activity.accepted > 0
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["faults"]["server"]["kills"] == server["kills"]


@pytest.mark.clause("S14")
def test_server_crashes_catch_a_store_that_acknowledges_what_never_landed(
    tmp_path: Path,
) -> None:
    """Seeded defect: appends the down server never got are acknowledged; caught."""
    _need_server_binaries()

    def defective(location: StoreLocation) -> StoreLocation:
        assert isinstance(location.opener, UrlOpener)
        return replace(location, opener=AcksWhenUnavailableOpener(location.opener))

    result = run_fault_soak(fault_profile("server", "quick"), wrap=defective)
    kinds = {item.kind for item in result.summary.violations}
    assert result.summary.faults["lost_acknowledged_writes"] > 0, kinds
    assert kinds & {"LOST WRITE", "COMPANION LOST ACK"}


@pytest.mark.clause("S13")
def test_a_connection_left_open_is_counted_as_a_leak() -> None:
    """The leak count is real: one connection held past the writers is one leak."""
    _need_server_binaries()
    import psycopg

    cluster = PrivateCluster("127.0.0.1", free_port())
    try:
        cluster.init()
        cluster.start()
        faults = ServerFaults(FaultPlan(), cluster)
        faults.leak_wait_s = 0.5
        with psycopg.connect(cluster.url()):
            figures, found = faults.finish()
        assert figures["server_connections"]["leaked"] == 1
        assert [item.kind for item in found] == ["CONNECTION LEAK"]
        figures, found = faults.finish()
        assert figures["server_connections"]["leaked"] == 0
        assert found == []
    finally:
        cluster.destroy()


def _event(t: str, ns: float, **more: Any) -> dict[str, Any]:
    return {"t": t, "w": more.pop("w", 0), "inc": 0, "ns": int(ns * NS), **more}


def _partition_history(
    late_accept: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """w0 holds run r epoch 1, is cut at 1 s, w1 takes r (epoch 2), heal at 3 s."""
    events = [
        _event("invoke", 0.1, id="a", op="acquire", run="r"),
        _event("grant", 0.2, id="a", run="r", epoch=1),
        _event("invoke", 1.5, w=1, id="b", op="acquire", run="r"),
        _event("grant", 1.6, w=1, id="b", run="r", epoch=2),
        _event("invoke", 3.5, id="c", op="append", run="r", epoch=1),
        _event("accept" if late_accept else "fence-kick", 3.6, id="c", run="r", epoch=1,
               surface="append"),
        _event("invoke", 3.7, id="d", op="acquire", run="r"),
        _event("grant", 3.8, id="d", run="r", epoch=3),
    ]  # fmt: skip
    chaos = [
        _event("partition", 1.0, run="r", epoch=1, hold_ms=2000, ttl_ms=250),
        _event("heal", 3.0),
    ]
    return events, chaos


@pytest.mark.clause("S13")
def test_the_judge_refuses_a_healed_holder_accepted_after_a_takeover() -> None:
    events, chaos = _partition_history(late_accept=True)
    figures, found = judge_faults(events, chaos, [], int(4 * NS))
    assert [item.kind for item in found] == ["PARTITIONED WRITER ACCEPTED"]
    assert figures["partitions"]["taken_over_while_cut"] == 1
    events, chaos = _partition_history(late_accept=False)
    figures, found = judge_faults(events, chaos, [], int(4 * NS))
    assert found == []
    assert figures["partitions"]["holder_calls_after_heal"] == {"fence-kick": 1}
    assert figures["partitions"]["recovered"] == 1


@pytest.mark.clause("S13")
@pytest.mark.clause("S14")
def test_the_judge_flags_a_writer_that_never_recovers() -> None:
    events, chaos = _partition_history(late_accept=False)
    stuck = [e for e in events if e["ns"] < 3 * NS]  # nothing succeeds after the heal
    later = int((3 + RECOVERY_S + 1) * NS)
    _, found = judge_faults(stuck, chaos, [], later)
    assert [item.kind for item in found] == ["NO RECOVERY"]
    server = [
        _event("server-kill", 1.0, processes=5),
        _event("server-up", 2.0, outage_ms=1000),
    ]
    _, found = judge_faults(stuck, server, [], later)
    assert {item.kind for item in found} == {"NO RECOVERY"}


@pytest.mark.clause("S13")
@pytest.mark.clause("S14")
def test_fault_profiles_meet_the_ci_targets() -> None:
    """Issue 20's per-run targets are the CI sizes' minimums."""
    network = fault_profile("network", "ci").plan
    assert network.partitions >= 20
    assert network.resets >= 20
    assert network.partition_ttls[0] > 1.0  # every cut outlives the lease
    assert fault_profile("server", "ci").plan.server_kills >= 3
