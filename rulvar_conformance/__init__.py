"""rulvar conformance kit: executable obligations of the store contract (CONTRACT 8).

Each suite factory takes ``mk``, a callable returning a FRESH isolated store per
call, and returns a ``ConformanceSuite`` of clause-tagged checks. Run a suite
standalone with ``suite.run()`` (the first violation raises
``ConformanceFailure``), under pytest with ``pytest_params(suite)``, or certify a
backend by URL with ``pytest --rulvar-store=URL`` / ``rulvar check``.
"""

from rulvar_conformance._kit import (
    CheckNotRun,
    ConformanceCheck,
    ConformanceFailure,
    ConformanceSuite,
    pytest_params,
)
from rulvar_conformance._site import ManualClock, Site, at_fresh_location
from rulvar_conformance.certify import (
    Certification,
    CheckResult,
    SuiteSpec,
    certification_suites,
    probe_capabilities,
    run_suites,
    suite_specs,
)
from rulvar_conformance.clauses import CLAUSES
from rulvar_conformance.data_edges import data_edges_conformance
from rulvar_conformance.fenced_transcripts import (
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
)
from rulvar_conformance.fenced_writes import fenced_writes_conformance
from rulvar_conformance.fold import (
    Classification,
    ResolutionFold,
    classify,
    fold_journal,
    fold_state,
    fold_state_sha256,
)
from rulvar_conformance.forced_races import forced_races_conformance
from rulvar_conformance.golden import (
    GOLDEN_FOLD_JOURNAL,
    GOLDEN_FOLD_STATE_JSON,
    GOLDEN_FOLD_STATE_SHA256,
    golden_fold_journal,
)
from rulvar_conformance.journal import journal_store_conformance
from rulvar_conformance.kill_points import kill_point_conformance
from rulvar_conformance.leasable import ExpiryPairing, leasable_store_conformance
from rulvar_conformance.lease_lifetime import lease_lifetime_conformance
from rulvar_conformance.shared_handle import shared_handle_conformance
from rulvar_conformance.soak.referee import verify_soak_history
from rulvar_conformance.soak.runner import (
    ChaosPlan,
    SoakFailure,
    SoakResult,
    run_multi_process_soak,
)
from rulvar_conformance.soak.tally import DEFAULT_SOAK_QUORUM, SoakQuorum
from rulvar_conformance.stale_surfaces import stale_surfaces_conformance
from rulvar_conformance.thread_races import thread_races_conformance
from rulvar_conformance.two_handles import two_handles_conformance
from rulvar_conformance.typed_errors import typed_errors_conformance

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
]
