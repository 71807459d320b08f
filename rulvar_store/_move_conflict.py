"""The refusal every row writer raises when a journal is not the length a copy expects."""

from __future__ import annotations

from rulvar_store.errors import CopyConflictError

__all__ = ["copy_conflict"]


def copy_conflict(run_id: str, expected: int, found: int) -> CopyConflictError:
    """``write_rows`` found ``found`` entries where the copy had seen ``expected``."""
    return CopyConflictError(
        f"run {run_id!r} at the destination holds {found} entries where the copy "
        f"expected {expected}: another writer changed it during the copy",
        run_id,
    )
