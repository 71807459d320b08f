"""Batch blob puts: several blobs of one run in one fenced unit (optional SPI, T11).

A writer that changes more than one blob per step (a checkpoint and the pointer
that names it) pays one transaction per ``put``. A store that also offers
``put_many`` lands them in ONE unit of its own::

    store.put_many([(ref_a, blob_a), (ref_b, blob_b)], lease)

Detect it with ``has_batch_put``; a store without it is still a full
``TranscriptStore`` and callers fall back to one ``put`` per blob.

Argument rules (checked before any I/O, nothing persisted when one fails):

- ``items`` is a ``list`` or ``tuple`` of ``(ref, blob)`` pairs; each ref and
  blob follows ``put``'s rules (D11, D14).
- With a lease, every ref belongs to the lease's run, else the F2 refusal
  (``LeaseRunMismatchError``) as for ``put``. Without one, every ref belongs to
  ONE run, else ``InvalidArgumentError``: the unit is a run's unit (its lock,
  its fence).
- A ref given twice is ``InvalidArgumentError``: which blob would win is not
  something a caller should have to look up.
- An empty batch does nothing and touches no storage (the lease is still
  type-checked, not checked against the store).

Outcome: all or nothing. A lease that is not live refuses the whole batch
(``LeaseHeldError``) and no blob changes; a batch that lands is visible whole,
to this handle and every other one, or not at all. The file store's batch is
single-writer and not atomic across its blobs (each blob lands atomically, in
order); it says so and declares no fence (T8).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from rulvar_store._intake import blob_bytes, lease_or_none, ref_for_write
from rulvar_store._protocols import TranscriptStore
from rulvar_store._records import BlobInput, Lease
from rulvar_store._run_match import check_run_match
from rulvar_store.errors import InvalidArgumentError

__all__ = [
    "AsyncBatchTranscriptStore",
    "BatchTranscriptStore",
    "BlobBatch",
    "CheckedBatch",
    "blob_batch",
]

BlobBatch: TypeAlias = Sequence[tuple[str, BlobInput]]
"""What ``put_many`` takes: ``(ref, blob)`` pairs, all of one run."""

OPERATION = "blob put_many"


@runtime_checkable
class BatchTranscriptStore(TranscriptStore, Protocol):
    """A blob store that also puts several blobs of one run as one unit."""

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of ``items`` all or nothing (T11)."""
        ...


@runtime_checkable
class AsyncBatchTranscriptStore(Protocol):
    """``BatchTranscriptStore``'s ``put_many`` for asyncio stores."""

    async def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of ``items`` all or nothing (T11)."""
        ...


class CheckedBatch(tuple[str, list[tuple[str, bytes]], Lease | None]):
    """``(run_id, [(ref, bytes)], lease)`` once the rules above hold."""

    __slots__ = ()

    @property
    def run_id(self) -> str:
        return self[0]

    @property
    def items(self) -> list[tuple[str, bytes]]:
        return self[1]

    @property
    def lease(self) -> Lease | None:
        return self[2]


def _invalid(problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{OPERATION}: items {problem}", OPERATION, "items")


def blob_batch(items: object, lease: object) -> CheckedBatch:
    """Check a batch by the rules of the module docstring; copy every blob (D3).

    ``run_id`` is ``""`` for an empty batch.

    Raises:
        InvalidArgumentError: a rule above is broken.
        LeaseRunMismatchError: a ref of another run than the lease's (F2).
    """
    checked_lease = lease_or_none(lease, OPERATION)
    if not isinstance(items, list | tuple):
        raise _invalid(
            f"must be a list or tuple of (ref, blob) pairs, got {type(items).__name__}"
        )
    run_id = ""
    seen: set[str] = set()
    copied: list[tuple[str, bytes]] = []
    for index, item in enumerate(items):
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise _invalid(f"[{index}] must be a (ref, blob) pair")
        ref, item_run = ref_for_write(item[0], OPERATION)
        check_run_match(checked_lease, item_run, OPERATION)
        if index == 0:
            run_id = item_run
        elif item_run != run_id:
            raise _invalid(
                f"name more than one run ({run_id!r} and {item_run!r}); a batch "
                "is one run's unit"
            )
        if ref in seen:
            raise _invalid(f"name the ref {ref!r} twice")
        seen.add(ref)
        copied.append((ref, blob_bytes(item[1], OPERATION)))
    return CheckedBatch((run_id, copied, checked_lease))
