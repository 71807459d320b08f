"""The public module for operators: audit, reconcile, retention, listing, the fold.

What ``rulvar runs``, ``rulvar repair`` and an operator's own scripts use to look at
runs without owning them and to clean up after them. The fold is the one reading
of a journal's resolution state that the audit, the kill points and the soak share.

Store users import from ``rulvar_store``; backend authors from
``rulvar_store.backend``.
"""

from rulvar_store._audit import (
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    ReconcileResult,
    RunStateAudit,
    SettleRef,
    audit_entries,
    audit_run,
    audit_runs,
    dangling_dispatches,
    iter_run_audits,
    journal_shape_problem,
    last_run_settle,
    reconcile_run_meta,
)
from rulvar_store._fold import (
    Classification,
    NoopReason,
    ResolutionFold,
    Seq,
    Verdict,
    classify,
    fold_journal,
    fold_state,
    fold_state_sha256,
)
from rulvar_store._observe import (
    DEFAULT_PAGE_SIZE,
    LeasePeek,
    LeaseState,
    ListedRun,
    MetaPages,
    RunIdListing,
    checked_meta,
    has_lease_peek,
    has_meta_pages,
    has_run_id_listing,
    iter_listed_runs,
    parse_meta_text,
)
from rulvar_store._retention import (
    SWEEP_OWNER_PREFIX,
    SweepOutcome,
    delete_run,
    is_leasable,
    prune_candidates,
    prune_run,
    sweep_owner,
    sweep_runs,
    with_brief_lease,
)
from rulvar_store._store_stats import COUNTER_NAMES, stats_since
from rulvar_store._telemetry import RunIdPolicy, configure_telemetry, process_stats

__all__ = [
    "COUNTER_NAMES",
    "DEFAULT_PAGE_SIZE",
    "RUN_STATUSES",
    "SWEEP_OWNER_PREFIX",
    "TERMINAL_RUN_STATUSES",
    "Classification",
    "LeasePeek",
    "LeaseState",
    "ListedRun",
    "MetaPages",
    "NoopReason",
    "ReconcileResult",
    "ResolutionFold",
    "RunIdListing",
    "RunIdPolicy",
    "RunStateAudit",
    "Seq",
    "SettleRef",
    "SweepOutcome",
    "Verdict",
    "audit_entries",
    "audit_run",
    "audit_runs",
    "checked_meta",
    "classify",
    "configure_telemetry",
    "dangling_dispatches",
    "delete_run",
    "fold_journal",
    "fold_state",
    "fold_state_sha256",
    "has_lease_peek",
    "has_meta_pages",
    "has_run_id_listing",
    "is_leasable",
    "iter_listed_runs",
    "iter_run_audits",
    "journal_shape_problem",
    "last_run_settle",
    "parse_meta_text",
    "process_stats",
    "prune_candidates",
    "prune_run",
    "reconcile_run_meta",
    "stats_since",
    "sweep_owner",
    "sweep_runs",
    "with_brief_lease",
]
