"""Lease checks every store runs before storage work: run match (F2) and the L6 refusal.

One definition for all backends, so a lease naming another run is refused the same
way everywhere, before any storage is touched.
"""

from __future__ import annotations

from rulvar_store._records import Lease
from rulvar_store.errors import LeaseHeldError, LeaseRunMismatchError

__all__ = ["check_run_match", "held_by", "not_live_lease"]


def check_run_match(lease: Lease | None, run_id: str, operation: str) -> None:
    """F2: a lease guards only the run it names; checked before any storage work.

    Raises:
        LeaseRunMismatchError: (a ``LeaseHeldError``, not retryable) the lease
            names another run.
    """
    if lease is not None and lease.run_id != run_id:
        raise LeaseRunMismatchError(
            f"{operation} of run {run_id!r} presented a lease for run {lease.run_id!r}",
            run_id,
            lease.owner,
            lease.epoch,
        )


def not_live_lease(operation: str, lease: Lease) -> LeaseHeldError:
    """The L6 refusal of a presented lease that is not the run's live lease."""
    return LeaseHeldError(
        f"{operation} of run {lease.run_id!r}: lease (owner {lease.owner!r}, epoch "
        f"{lease.epoch}) is not the live lease",
        lease.run_id,
        lease.owner,
        lease.epoch,
    )


def held_by(
    run_id: str, holder: str, epoch: int, retry_after_ms: int
) -> LeaseHeldError:
    """The L1 refusal of an acquire: who holds the run, at which epoch, until when."""
    retry_after_ms = max(0, int(retry_after_ms))
    return LeaseHeldError(
        f"run {run_id!r} is leased by {holder!r} (epoch {epoch}); its lease "
        f"expires in {retry_after_ms} ms unless renewed",
        run_id,
        holder,
        epoch,
        retry_after_ms,
    )
