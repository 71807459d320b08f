"""rulvar conformance kit: executable obligations of the store contract (CONTRACT 8).

Two groups: ``rulvar_conformance.suites`` (what is checked: one module per
suite, each built from one ``Certification``) and ``rulvar_conformance.harness``
(what runs the checks: the check skeleton, certification, deadlines, locations,
child processes). Certify a backend by URL with ``rulvar check`` /
``pytest --rulvar-store=URL``, over a ``LocationFactory`` with
``certification_suites(Certification(...))``, or build the classic suites from a
plain factory of fresh stores (``journal_store_conformance(mk)``). Run a suite
standalone with ``suite.run()`` (the first violation raises
``ConformanceFailure``) or under pytest with ``pytest_params(suite)``.
"""

from rulvar_conformance.clauses import CLAUSES
from rulvar_conformance.fold import (
    Classification,
    ResolutionFold,
    classify,
    fold_journal,
    fold_state,
    fold_state_sha256,
)
from rulvar_conformance.golden import (
    GOLDEN_FOLD_JOURNAL,
    GOLDEN_FOLD_STATE_JSON,
    GOLDEN_FOLD_STATE_SHA256,
    golden_fold_journal,
)
from rulvar_conformance.harness.certify import (
    Certification,
    CheckResult,
    SuiteSpec,
    certification_suites,
    probe_capabilities,
    run_suites,
    suite_specs,
)
from rulvar_conformance.harness.kit import (
    CheckNotRun,
    ConformanceCheck,
    ConformanceFailure,
    ConformanceSuite,
    pytest_params,
)
from rulvar_conformance.harness.site import ManualClock, Site, at_fresh_location
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_conformance.soak.referee import verify_soak_history
from rulvar_conformance.soak.runner import (
    ChaosPlan,
    SoakFailure,
    SoakResult,
    run_multi_process_soak,
)
from rulvar_conformance.soak.tally import DEFAULT_SOAK_QUORUM, SoakQuorum
from rulvar_conformance.suites.data_edges import data_edges_conformance
from rulvar_conformance.suites.fenced_transcripts import (
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
)
from rulvar_conformance.suites.fenced_writes import fenced_writes_conformance
from rulvar_conformance.suites.forced_races import forced_races_conformance
from rulvar_conformance.suites.journal import journal_store_conformance
from rulvar_conformance.suites.leasable import ExpiryPairing, leasable_store_conformance
from rulvar_conformance.suites.lease_lifetime import lease_lifetime_conformance
from rulvar_conformance.suites.shared_handle import shared_handle_conformance
from rulvar_conformance.suites.stale_surfaces import stale_surfaces_conformance
from rulvar_conformance.suites.thread_races import thread_races_conformance
from rulvar_conformance.suites.two_handles import two_handles_conformance
from rulvar_conformance.suites.typed_errors import typed_errors_conformance
from rulvar_conformance.suites.worker_life import worker_life_conformance

__all__ = [
    "CLAUSES",
    "DEFAULT_SOAK_QUORUM",
    "GOLDEN_FOLD_JOURNAL",
    "GOLDEN_FOLD_STATE_JSON",
    "GOLDEN_FOLD_STATE_SHA256",
    "Certification",
    "ChaosPlan",
    "CheckNotRun",
    "CheckResult",
    "Classification",
    "ConformanceCheck",
    "ConformanceFailure",
    "ConformanceSuite",
    "ExpiryPairing",
    "FencedTranscriptsFixture",
    "ManualClock",
    "ResolutionFold",
    "Site",
    "SoakFailure",
    "SoakQuorum",
    "SoakResult",
    "SuiteSpec",
    "at_fresh_location",
    "certification_suites",
    "classify",
    "data_edges_conformance",
    "fenced_transcripts_conformance",
    "fenced_writes_conformance",
    "fold_journal",
    "fold_state",
    "fold_state_sha256",
    "forced_races_conformance",
    "golden_fold_journal",
    "journal_store_conformance",
    "kill_point_conformance",
    "leasable_store_conformance",
    "lease_lifetime_conformance",
    "probe_capabilities",
    "pytest_params",
    "run_multi_process_soak",
    "run_suites",
    "shared_handle_conformance",
    "stale_surfaces_conformance",
    "suite_specs",
    "thread_races_conformance",
    "two_handles_conformance",
    "typed_errors_conformance",
    "verify_soak_history",
    "worker_life_conformance",
]
