"""Optional abilities a store may offer to copies: raw rows in, raw rows out, epochs.

A copy works through the SPI alone (``load``, ``append``, ``put_meta``,
``acquire``/``release``, the blob twin), which any third-party store passes. Two
optional abilities, each read through one helper like those of ``_observe``,
make it exact and fast where a backend offers them:

- ``RunRows`` (``has_run_rows``): a journal read page by page as the stored
  text (``entry_rows``), the meta as stored text (``meta_row``) and the run's
  epoch counter (``epoch_counter``). A copy then carries records byte for byte
  and holds one page at a time, however long the journal.
- ``RunRowsWriter`` (``has_run_rows_writer``): a batch of entry texts, a meta
  text and an epoch floor written in one fenced transaction (``write_rows``),
  and the moved-run tombstone (``fence_moved``, see ``_moved``).

The memory, SQLite and PostgreSQL stores offer both; the file store neither (it
has no leases, hence no epochs to carry).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from rulvar_store._records import Lease

__all__ = [
    "RunBatchWriter",
    "RunRows",
    "RunRowsWriter",
    "has_run_batches",
    "has_run_rows",
    "has_run_rows_writer",
]


@runtime_checkable
class RunRows(Protocol):
    def entry_rows(self, run_id: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (position, entry text) pairs after position ``after``.

        Positions grow in load order; ``0`` is before the first entry.
        """
        ...

    def entry_count(self, run_id: str) -> int: ...

    def meta_row(self, run_id: str) -> str | None: ...

    def epoch_counter(self, run_id: str) -> int:
        """The highest epoch the run ever had (counter or lease row), 0 if none."""
        ...


@runtime_checkable
class RunRowsWriter(Protocol):
    def write_rows(
        self,
        run_id: str,
        lease: Lease | None,
        *,
        expected_entries: int,
        entries: Sequence[str],
        meta: str | None,
        epoch: int,
        blobs: Sequence[tuple[str, bytes]] = (),
        durable: bool = True,
    ) -> None:
        """Append ``entries`` as stored text, replace the meta and blobs, raise the counter.

        One transaction: the fence (when ``lease`` is given; without one, the
        run must have no live lease, else ``LeaseHeldError``), then a check that
        the journal holds exactly ``expected_entries`` entries (else
        ``CopyConflictError``: someone else wrote), then the rows. ``meta`` None
        leaves the meta alone; ``blobs`` are (ref, data) of this run, each
        stored or replaced; the counter becomes ``max(counter, epoch)``.
        ``durable=False`` may return before the commit is durable (a store
        where that is cheaper); ``flush_writes`` is then the barrier.
        """
        ...

    def flush_writes(self) -> None:
        """Return once every write this store acknowledged so far is durable."""
        ...

    def fence_moved(self, lease: Lease, owner: str) -> int:
        """Turn the live ``lease`` into the moved-run tombstone; return its epoch.

        One transaction: the fence, then the counter and the lease row move to
        an epoch above every one the run had, held by ``owner`` until
        ``NEVER_EXPIRES_MS``.
        """
        ...


@runtime_checkable
class RunBatchWriter(Protocol):
    def write_runs(
        self,
        items: Sequence[
            tuple[str, Sequence[str], str | None, int, Sequence[tuple[str, bytes]]]
        ],
        *,
        durable: bool = True,
    ) -> None:
        """Several runs new to this store in ONE transaction: (run id, entries, meta,
        epoch floor, blobs) each; every run must hold no entries and no live lease
        there, else nothing is written (``CopyConflictError``, ``LeaseHeldError``)."""
        ...


def has_run_batches(store: object) -> TypeGuard[RunBatchWriter]:
    """Return whether ``store`` writes many small new runs in one transaction."""
    return isinstance(store, RunBatchWriter)


def has_run_rows(store: object) -> TypeGuard[RunRows]:
    """Return whether ``store`` reads its runs as stored rows (``RunRows``)."""
    return isinstance(store, RunRows)


def has_run_rows_writer(store: object) -> TypeGuard[RunRowsWriter]:
    """Return whether ``store`` writes rows and tombstones (``RunRowsWriter``)."""
    return isinstance(store, RunRowsWriter)
