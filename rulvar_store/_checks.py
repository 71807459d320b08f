"""Argument checks every store runs before touching its storage (F2, D1, typed errors).

One definition for all backends: wrong types become ``InvalidArgumentError`` (a
``ContractError``: the caller's bug) instead of a driver error, and a lease naming
another run is refused before any storage work (F2). The rules themselves live in
``_intake``; these are the older entry points, kept for callers that use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rulvar_store import _intake
from rulvar_store._records import Lease
from rulvar_store.errors import (
    InvalidArgumentError,
    LeaseHeldError,
    LeaseRunMismatchError,
)

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
    """Return ``value`` if it is a str any backend can look up (read rule).

    Raises:
        InvalidArgumentError: not a str, or a NUL or lone surrogate in it.
    """
    return _intake.text_for_read(value, operation, what)


def check_run_id(run_id: object, operation: str) -> str:
    """Return ``run_id`` under the read rule (``_intake.run_id_for_read``)."""
    return _intake.run_id_for_read(run_id, operation)


def check_ref(ref: object, operation: str) -> str:
    """Return ``ref`` under the read rule (``_intake.ref_for_read``)."""
    return _intake.ref_for_read(ref, operation)[0]


def check_lease(lease: object, operation: str) -> Lease | None:
    """Return ``lease`` if it is ``None`` or a well-typed ``Lease``.

    Raises:
        InvalidArgumentError: anything else was passed as the lease.
    """
    return _intake.lease_or_none(lease, operation)


def require_lease(lease: object, operation: str) -> Lease:
    """Return ``lease`` if it is a well-typed ``Lease``.

    Raises:
        InvalidArgumentError: anything else (``None`` included) was passed.
    """
    return _intake.require_lease(lease, operation)


def check_entry(entry: object, run_id: str) -> Mapping[str, Any]:
    """Return ``entry`` if it is a dict (D1).

    Raises:
        InvalidArgumentError: it is not a JSON object.
    """
    if not isinstance(entry, dict):
        raise InvalidArgumentError(
            f"append to run {run_id!r}: entry must be a dict, "
            f"got {type(entry).__name__}",
            "append",
            "entry",
        )
    return entry


def meta_run_id(meta: object) -> str:
    """Return ``meta["runId"]`` under the run id write rule.

    Raises:
        InvalidArgumentError: meta is not a dict or its ``runId`` is not a valid id.
    """
    if not isinstance(meta, dict):
        raise InvalidArgumentError(
            f"put_meta: meta must be a dict, got {type(meta).__name__}",
            "put_meta",
            "meta",
        )
    return _intake.run_id_for_write(meta.get("runId"), "put_meta", "meta['runId']")


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
