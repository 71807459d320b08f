"""Leasable locations without an injectable clock: the resume polls, the table declines."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_conformance import Certification, CheckNotRun
from rulvar_conformance.kill_points import (
    KILL_POINT_SCENARIOS,
    kill_point_conformance,
    run_kill_point_scenario,
)
from rulvar_store.backend import StoreLocation, UrlOpener


def clockless(path: Path) -> StoreLocation:
    return StoreLocation(
        name=str(path), opener=UrlOpener(f"sqlite:///{path}"), clock=False
    )


@pytest.mark.clause("K7")
def test_resume_polls_until_the_dead_workers_lease_expires(tmp_path: Path) -> None:
    """Without a clock the resume retries on LeaseHeldError until the ttl passes."""
    scenario = next(s for s in KILL_POINT_SCENARIOS if s.id == "happy-running-after")
    seen = run_kill_point_scenario(
        clockless(tmp_path / "kp.db"), scenario, tmp_path, ttl_ms=500
    )
    assert (seen.child_calls, seen.resume_calls) == (1, 1)
    assert seen.meta_status == "ok"
    assert seen.journal[-1] == "decision:ok"


@pytest.mark.clause("K8")
def test_store_rows_need_a_clock_on_a_leasable_store(tmp_path: Path) -> None:
    """The referee moves a clock past the dead child's lease; without one: NOT RUN."""
    suite = kill_point_conformance(
        Certification(lambda: clockless(tmp_path / "kp.db"), frozenset({"leases"}))
    )
    with pytest.raises(CheckNotRun, match="takes no clock"):
        suite.check("kp-store-append-after-commit").run()
