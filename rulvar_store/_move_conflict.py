"""The refusal every row writer raises when a journal is not the length a copy expects."""

from __future__ import annotations

from collections.abc import Sequence

from rulvar_store._intake import blob_bytes, ref_for_write
from rulvar_store.errors import CopyConflictError, InvalidArgumentError

__all__ = ["copy_blobs", "copy_conflict", "distinct_runs"]


def distinct_runs(run_ids: Sequence[str]) -> None:
    """A ``write_runs`` names each run once.

    Raises:
        InvalidArgumentError: a run id appears twice.
    """
    if len(set(run_ids)) != len(run_ids):
        raise InvalidArgumentError(
            "write_runs: a run appears twice in one batch", "write_runs", "items"
        )


def copy_blobs(
    run_id: str, blobs: Sequence[tuple[str, bytes]]
) -> list[tuple[str, bytes]]:
    """Check the (ref, data) pairs a ``write_rows`` stores: refs of ``run_id`` only (D11).

    Raises:
        InvalidArgumentError: a ref breaks the write rules or names another run.
    """
    checked: list[tuple[str, bytes]] = []
    for ref, data in blobs:
        ref, ref_run = ref_for_write(ref, "write_rows")
        if ref_run != run_id:
            raise InvalidArgumentError(
                f"write_rows of run {run_id!r}: blob ref {ref!r} names run {ref_run!r}",
                "write_rows",
                "blobs",
            )
        checked.append((ref, blob_bytes(data, "write_rows")))
    return checked


def copy_conflict(run_id: str, expected: int, found: int) -> CopyConflictError:
    """``write_rows`` found ``found`` entries where the copy had seen ``expected``."""
    return CopyConflictError(
        f"run {run_id!r} at the destination holds {found} entries where the copy "
        f"expected {expected}: another writer changed it during the copy",
        run_id,
    )
