"""Broken movers: memory stores whose copy abilities (``_move_rows``) each have one bug.

The store-side half of a mover is what a backend author writes (``write_rows``,
``entry_rows``, ``fence_moved``); ``rulvar_store.ops.copy_run`` is the other.
Open them through ``_broken_memory_races.memory_locations``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rulvar_store import Lease, MemoryStore

__all__ = [
    "EntryRowsSkipOnLaterPages",
    "EpochFloorIgnored",
    "GroupDropsEpochs",
    "TombstoneReleases",
]


class EpochFloorIgnored(MemoryStore):  # type: ignore[misc]  # final; the bug is the point
    """``write_rows`` drops the epoch floor: the copy arrives, its epoch counter does not.

    A zombie of the source could then meet its own epoch again at the destination.
    """

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
        super().write_rows(
            run_id,
            lease,
            expected_entries=expected_entries,
            entries=entries,
            meta=meta,
            epoch=0,
            blobs=blobs,
            durable=durable,
        )


class TombstoneReleases(MemoryStore):  # type: ignore[misc]  # final
    """``fence_moved`` gives the mover's lease up instead of leaving a tombstone.

    The moved run's source is then free for anyone to acquire and write again.
    """

    def fence_moved(self, lease: Lease, owner: str) -> int:
        self.release(lease)
        return lease.epoch


class EntryRowsSkipOnLaterPages(MemoryStore):  # type: ignore[misc]  # final
    """``entry_rows`` past the first page starts one row late (an off-by-one cursor).

    Short runs copy fine; a run longer than a page loses one entry per page.
    """

    def entry_rows(self, run_id: str, after: int, limit: int) -> list[tuple[int, str]]:
        rows = super().entry_rows(run_id, after, limit)
        return rows[1:] if after > 0 else rows


class GroupDropsEpochs(MemoryStore):  # type: ignore[misc]  # final
    """``write_runs`` (many small runs in one unit) drops every run's epoch floor.

    Copies one run at a time carry the epoch; a bulk copy of many does not.
    """

    def write_runs(
        self,
        items: Sequence[
            tuple[str, Sequence[str], str | None, int, Sequence[tuple[str, bytes]]]
        ],
        *,
        durable: bool = True,
    ) -> None:
        super().write_runs(
            [
                (run_id, entries, meta, 0, blobs)
                for run_id, entries, meta, _, blobs in items
            ],
            durable=durable,
        )
