"""Kill points (CONTRACT 9): recovery under real process death.

A child process drives a scripted run over a store and SIGKILLs itself just
before or after one durable write (the ten scenarios of 9.2), or dies inside
one store operation at one failpoint of its transaction (the store-level
table); the referee opens the location again and checks the documented
recovery. ``kill_point_conformance`` builds the suite; ``rulvar check URL
--suite kill-points`` runs it.
"""

from rulvar_conformance.kill_points.child import (
    KillPointWorkerConfig,
    kill_point_worker_config_from_env,
)
from rulvar_conformance.kill_points.driver import (
    KP_HAPPY,
    KP_LIMIT,
    ScriptedProvider,
    SegmentOutcome,
    run_segment,
)
from rulvar_conformance.kill_points.referee import (
    KillPointObservation,
    run_kill_point_scenario,
)
from rulvar_conformance.kill_points.scenarios import (
    KILL_POINT_SCENARIOS,
    KillPointScenario,
)
from rulvar_conformance.kill_points.store_ops import STORE_CASES, StoreCase
from rulvar_conformance.kill_points.suite import kill_point_conformance
from rulvar_conformance.kill_points.worker import run_kill_point_worker

__all__ = [
    "KILL_POINT_SCENARIOS",
    "KP_HAPPY",
    "KP_LIMIT",
    "STORE_CASES",
    "KillPointObservation",
    "KillPointScenario",
    "KillPointWorkerConfig",
    "ScriptedProvider",
    "SegmentOutcome",
    "StoreCase",
    "kill_point_conformance",
    "kill_point_worker_config_from_env",
    "run_kill_point_scenario",
    "run_kill_point_worker",
    "run_segment",
]
