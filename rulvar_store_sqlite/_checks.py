"""Argument checks that run before any database work: typed errors for bad input."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rulvar_store._records import Lease, RunFilter
from rulvar_store.errors import ContractError, LeaseHeldError

__all__ = [
    "check_entry",
    "check_filter",
    "check_lease",
    "check_ref",
    "check_run_id",
    "check_run_match",
    "meta_run_id",
    "require_lease",
    "seq_param",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def check_run_id(run_id: object, operation: str) -> str:
    """Return ``run_id`` if it is a str.

    Raises:
        ContractError: it is not.
    """
    if not isinstance(run_id, str):
        raise ContractError(
            f"{operation}: run_id must be a str, got {type(run_id).__name__}"
        )
    return run_id


def check_ref(ref: object, operation: str) -> str:
    """Return ``ref`` if it is a str.

    Raises:
        ContractError: it is not.
    """
    if not isinstance(ref, str):
        raise ContractError(f"{operation}: ref must be a str, got {type(ref).__name__}")
    return ref


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
    """F2: a lease guards only the run it names; checked before any database work.

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


def check_filter(run_filter: object) -> RunFilter | None:
    """Return ``run_filter`` if every field has a bindable type.

    Raises:
        ContractError: not a RunFilter, or a field of the wrong type (a bare str
            as ``statuses`` would be matched per character).
    """
    if run_filter is None:
        return None
    if not isinstance(run_filter, RunFilter):
        raise ContractError(
            f"list_runs: run_filter must be a RunFilter, got {type(run_filter).__name__}"
        )
    for name in ("status", "name"):
        value = getattr(run_filter, name)
        if value is not None and not isinstance(value, str):
            raise ContractError(f"list_runs: RunFilter.{name} must be a str or None")
    for name in ("statuses", "tags"):
        values = getattr(run_filter, name)
        if values is None:
            continue
        if isinstance(values, str | bytes) or not all(
            isinstance(value, str) for value in values
        ):
            raise ContractError(
                f"list_runs: RunFilter.{name} must be a sequence of str or None"
            )
    return run_filter


def seq_param(seq: int | float) -> int | float:
    """Bind a finite seq for SQL: int64 stays exact, anything wider becomes a float.

    SQLite itself reads JSON integers beyond int64 as REAL, so the comparison stays
    consistent with what ``json_extract`` yields for stored entries.
    """
    if isinstance(seq, int) and not _INT64_MIN <= seq <= _INT64_MAX:
        try:
            return float(seq)
        except OverflowError:
            return math.copysign(math.inf, seq)
    return seq
