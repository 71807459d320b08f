"""Argument checks every store runs before touching its storage (F2, D1, typed errors).

One definition for all backends: wrong types become ``ContractError`` (the caller's
bug) instead of a driver error, and a lease naming another run is refused before
any storage work (F2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rulvar_store._records import Lease
from rulvar_store.errors import ContractError, LeaseHeldError

__all__ = [
    "check_entry",
    "check_lease",
    "check_ref",
    "check_run_id",
    "check_run_match",
    "check_text",
    "meta_run_id",
    "not_live_lease",
    "require_lease",
]


def check_text(value: object, what: str, operation: str) -> str:
    """Return ``value`` if it is a str.

    Raises:
        ContractError: it is not.
    """
    if not isinstance(value, str):
        raise ContractError(
            f"{operation}: {what} must be a str, got {type(value).__name__}"
        )
    return value


def check_run_id(run_id: object, operation: str) -> str:
    """Return ``run_id`` if it is a str (``ContractError`` otherwise)."""
    return check_text(run_id, "run_id", operation)


def check_ref(ref: object, operation: str) -> str:
    """Return ``ref`` if it is a str (``ContractError`` otherwise)."""
    return check_text(ref, "ref", operation)


def check_lease(lease: object, operation: str) -> Lease | None:
    """Return ``lease`` if it is a ``Lease`` or ``None``.

    Raises:
        ContractError: anything else was passed as the lease.
    """
    if lease is not None and not isinstance(lease, Lease):
        raise ContractError(
            f"{operation}: lease must be a Lease or None, got {type(lease).__name__}"
        )
    return lease


def require_lease(lease: object, operation: str) -> Lease:
    """Return ``lease`` if it is a ``Lease``.

    Raises:
        ContractError: anything else (``None`` included) was passed.
    """
    if not isinstance(lease, Lease):
        raise ContractError(
            f"{operation}: lease must be a Lease, got {type(lease).__name__}"
        )
    return lease


def check_entry(entry: object, run_id: str) -> Mapping[str, Any]:
    """Return ``entry`` if it is a dict (D1).

    Raises:
        ContractError: it is not a JSON object.
    """
    if not isinstance(entry, dict):
        raise ContractError(
            f"append to run {run_id!r}: an entry must be a dict, "
            f"got {type(entry).__name__}"
        )
    return entry


def meta_run_id(meta: object) -> str:
    """Return ``meta["runId"]``.

    Raises:
        ContractError: meta is not a dict or has no string ``runId``.
    """
    run_id = meta.get("runId") if isinstance(meta, dict) else None
    if not isinstance(run_id, str):
        raise ContractError("put_meta: meta must be a dict with a string 'runId'")
    return run_id


def check_run_match(lease: Lease | None, run_id: str, operation: str) -> None:
    """F2: a lease guards only the run it names; checked before any storage work.

    Raises:
        LeaseHeldError: the lease names another run.
    """
    if lease is not None and lease.run_id != run_id:
        raise LeaseHeldError(
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
