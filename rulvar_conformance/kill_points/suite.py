"""The kill-point suite (CONTRACT K8): one check per scenario and per store-level case.

``kill_point_conformance(certification)`` builds the suite over the
certification's locations; ``rulvar check URL --suite kill-points`` and the
pytest plugin (``--rulvar-suite kill-points``) find it in the suites registry
(``rulvar_conformance.suites.kill_points``).
Each check gets a fresh location that a spawned child opens itself; a location
that cannot go to a child process (``processes=False``, the in-memory store)
reports every check NOT RUN with the reason. The ten scenarios need leases; a
store without them reports them not run, and its store-level rows cover the
operations it has (append, put_meta, delete, blob put and delete for the file
store).
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    build_check,
    not_run,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.kill_points.referee import (
    RESUME_DEADLINE_MS,
    WORKER_TTL_MS,
    run_kill_point_scenario,
)
from rulvar_conformance.kill_points.scenarios import (
    KILL_POINT_SCENARIOS,
    KillPointScenario,
)
from rulvar_conformance.kill_points.spawn import WarmWorkers
from rulvar_conformance.kill_points.store_level import ensure_point, run_store_case
from rulvar_conformance.kill_points.store_ops import (
    STORE_CASES,
    StoreCase,
    probe_points,
)
from rulvar_store.backend import LocationFactory

__all__ = ["SCENARIO_CLAUSES", "kill_point_conformance"]

SCENARIO_CLAUSES = ("K2", "K5", "K6", "K7", "A7", "A8")


class _PointProbe:
    """Learns, once per operation, which failpoints the store's path passes."""

    def __init__(self, locations: LocationFactory) -> None:
        self._locations = locations
        self._lock = threading.Lock()
        self._found: dict[str, frozenset[str] | None] = {}

    def points(self, operation: str) -> frozenset[str] | None:
        with self._lock:
            if operation not in self._found:
                self._found[operation] = probe_points(self._locations(), operation)
            return self._found[operation]


def _scenario_check(
    locations: LocationFactory,
    capabilities: frozenset[str],
    scenario: KillPointScenario,
    ttl_ms: int,
    resume_deadline_ms: int,
    workers: WarmWorkers | None,
) -> ConformanceCheck:
    def body() -> None:
        if "leases" not in capabilities:
            not_run("the scenarios drive a leased run; the store declares no leases")
        with (
            at_fresh_location(locations, needs=("processes", "shared")) as site,
            tempfile.TemporaryDirectory(prefix="rulvar-kp-") as workdir,
        ):
            run_kill_point_scenario(
                site.location,
                scenario,
                Path(workdir),
                ttl_ms=ttl_ms,
                resume_deadline_ms=resume_deadline_ms,
                workers=workers,
            )

    title = (
        f"SIGKILL {scenario.phase} the {scenario.point} write #{scenario.occurrence} "
        f"of {scenario.workflow}: {scenario.note}"
    )
    return build_check(f"kp-{scenario.id}", title, SCENARIO_CLAUSES, body)


def _store_check(
    locations: LocationFactory,
    probe: _PointProbe,
    case: StoreCase,
    workers: WarmWorkers | None,
) -> ConformanceCheck:
    def body() -> None:
        with (
            at_fresh_location(locations, needs=("processes", "shared")) as site,
            tempfile.TemporaryDirectory(prefix="rulvar-kp-") as workdir,
        ):
            ensure_point(probe.points(case.operation), case)
            run_store_case(site.location, case, Path(workdir), workers)

    title = (
        f"SIGKILL inside {case.operation} at {case.point}: all or nothing, "
        "then a usable store"
    )
    return build_check(case.id, title, case.clauses, body)


def kill_point_conformance(
    certification: Certification,
    *,
    ttl_ms: int = WORKER_TTL_MS,
    resume_deadline_ms: int = RESUME_DEADLINE_MS,
    warm: bool = True,
) -> ConformanceSuite:
    """The kill-point suite: ``kp-<scenario>`` rows, then ``kp-store-<op>-<point>`` rows.

    Building opens nothing; each check makes its own fresh location. ``warm``
    keeps the next row's child process started ahead (``False``: each row
    starts its child when it runs).
    """
    locations, capabilities = certification.locations, certification.capabilities
    probe = _PointProbe(locations)
    # One child is kept started ahead for the next row; it ends with the suite.
    workers = WarmWorkers() if warm else None
    scenarios = [
        _scenario_check(locations, capabilities, s, ttl_ms, resume_deadline_ms, workers)
        for s in KILL_POINT_SCENARIOS
    ]
    stores = [_store_check(locations, probe, case, workers) for case in STORE_CASES]
    return ConformanceSuite("kill-points", (*scenarios, *stores))
