"""Argument checks every PostgresStore method runs before touching the database.

Wrong types would otherwise reach the server as a function-resolution error;
here they are a ``ContractError`` (the caller's bug), and a lease naming another
run is refused (F2) before any connection is taken.
"""

from __future__ import annotations

from rulvar_store._records import Lease
from rulvar_store.errors import ContractError, LeaseHeldError

__all__ = ["check_lease", "check_run_match", "check_text", "not_live"]


def check_text(value: object, what: str, operation: str) -> str:
    """Return ``value`` if it is a str (run ids, owners, refs go to TEXT columns)."""
    if not isinstance(value, str):
        raise ContractError(
            f"{operation}: {what} must be a str, got {type(value).__name__}"
        )
    return value


def check_lease(lease: object, operation: str) -> Lease | None:
    """Return ``lease`` if it is a ``Lease`` or ``None``."""
    if lease is not None and not isinstance(lease, Lease):
        raise ContractError(
            f"{operation}: lease must be a Lease or None, got {type(lease).__name__}"
        )
    return lease


def check_run_match(lease: Lease | None, run_id: str, operation: str) -> None:
    """F2: a lease guards only the run it names; refused before any database work."""
    if lease is not None and lease.run_id != run_id:
        raise LeaseHeldError(
            f"{operation} of run {run_id!r} presented a lease for run {lease.run_id!r}",
            run_id,
            lease.owner,
            lease.epoch,
        )


def not_live(operation: str, lease: Lease) -> LeaseHeldError:
    """The L6 refusal of a presented lease that is not the run's live lease."""
    return LeaseHeldError(
        f"{operation} of run {lease.run_id!r}: lease (owner {lease.owner!r}, epoch "
        f"{lease.epoch}) is not the live lease",
        lease.run_id,
        lease.owner,
        lease.epoch,
    )
