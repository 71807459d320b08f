"""Argument checks that run before any database work; the generic ones live in the core."""

from __future__ import annotations

import math

from rulvar_store import _intake
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
    """Return ``run_filter`` if every field has a bindable type (``_intake.run_filter``).

    Raises:
        InvalidArgumentError: not a RunFilter, or a field of the wrong type (a bare
            str as ``statuses`` would be matched per character).
    """
    return _intake.run_filter(run_filter)


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
