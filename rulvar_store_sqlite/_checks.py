"""Argument checks that run before any database work; the generic ones live in the core."""

from __future__ import annotations

import math

from rulvar_store._checks import (
    check_entry,
    check_lease,
    check_ref,
    check_run_id,
    check_run_match,
    meta_run_id,
    require_lease,
)
from rulvar_store._records import RunFilter
from rulvar_store.errors import ContractError

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
