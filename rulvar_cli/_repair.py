"""One run's repair for ``runs audit --repair`` (A6): lease, reconcile, release."""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass
from typing import Literal, cast

from rulvar_store import JournalStore, LeasableStore, Lease
from rulvar_store.errors import LeaseHeldError, RulvarError
from rulvar_store.ops import RunStateAudit, is_leasable, reconcile_run_meta

__all__ = ["RepairOutcome", "audit_owner", "repair_audit"]


@dataclass(frozen=True, slots=True)
class RepairOutcome:
    """What the repair pass did with one reported run, and whether it remains."""

    action: Literal["repaired", "skipped", "not-repaired", "already-consistent"]
    suffix: str
    remains: bool


def audit_owner() -> str:
    """The lease owner of this process's repairs: ``runs-audit-<pid>`` (A6)."""
    return f"runs-audit-{os.getpid()}"


def repair_audit(
    journal: JournalStore, audit: RunStateAudit, *, owner: str | None = None
) -> RepairOutcome:
    """Repair the run ``audit`` names, under a brief lease where the store has leases.

    A live lease of another owner: skipped at once, never waited for or raced
    (so of two passes started together, one repairs and the other skips). The
    reconcile re-audits under the lease; a run another pass already fixed is
    ``already-consistent`` and does not remain. The lease is released in any
    case. Errors other than ``LeaseHeldError`` propagate.
    """
    who = owner if owner is not None else audit_owner()
    lease: Lease | None = None
    leasable: LeasableStore | None = None
    if is_leasable(journal):
        leasable = cast(LeasableStore, journal)  # is_leasable checked it
        try:
            lease = leasable.acquire(audit.run_id, who)
        except LeaseHeldError:
            return RepairOutcome("skipped", " (leased by a live owner, skipped)", True)
    try:
        result = reconcile_run_meta(journal, audit.run_id, lease=lease)
    except LeaseHeldError:
        return RepairOutcome("not-repaired", " (lost its lease, not repaired)", True)
    finally:
        if leasable is not None and lease is not None:
            with suppress(RulvarError):  # expired or taken over: nothing left to free
                leasable.release(lease)
    if result.repaired:
        return RepairOutcome(
            "repaired", f" (repaired to {result.audit.repair_to!r})", False
        )
    if result.audit.verdict == "consistent":
        return RepairOutcome("already-consistent", " (already consistent)", False)
    return RepairOutcome("not-repaired", " (not repaired)", True)
