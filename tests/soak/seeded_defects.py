"""SQLite stores with one seeded fencing defect each, for the soak that must bite.

They live in an importable module (not a test body) because the soak's writer
processes unpickle the location's opener and import this module by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rulvar_store import Lease, LeaseHeldError, OpenedStore
from rulvar_store._records import Clock
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._group_commit import Operation

DEFECTS: Final = (
    "expired-lease-accepted",
    "stale-release-deletes-successor",
    "fence-first-of-batch",
)


class ExpiredLeaseAccepted(SqliteStore):
    """Defect: the fence matches owner and epoch but forgets expiry (L6 says live)."""

    def _assert_fencing(self, lease: Lease) -> None:
        rows = self._cursor.execute(
            "SELECT 1 FROM leases WHERE run_id = ? AND owner = ? AND epoch = ?",
            (lease.run_id, lease.owner, lease.epoch),
        ).fetchall()
        if not rows:
            raise LeaseHeldError(
                "not the lease", lease.run_id, lease.owner, lease.epoch
            )


class StaleReleaseDeletesSuccessor(SqliteStore):
    """Defect: release deletes the run's lease row without any fence (F3's stale release)."""

    def release(self, lease: Lease) -> None:
        self._write(
            "release",
            None,
            lambda cursor: cursor.execute(
                "DELETE FROM leases WHERE run_id = ?", (lease.run_id,)
            ),
        )


class FenceFirstOfBatch(SqliteStore):
    """Defect: group commit checks the lease of each batch's first operation only.

    A lone caller is fenced; a stale probe that shares a transaction with a
    companion's append rides on its (absent) check. Only a soak with companion
    threads on the writers' handles can make such batches.
    """

    def _run_batch(self, batch: list[Operation[Any]], more: Callable[[], bool]) -> None:
        def more_unfenced() -> bool:
            grew = more()
            for op in batch[1:]:
                op.fence = None
            return grew

        for op in batch[1:]:
            op.fence = None
        super()._run_batch(batch, more_unfenced)


_CLASSES: Final = {
    "expired-lease-accepted": ExpiredLeaseAccepted,
    "stale-release-deletes-successor": StaleReleaseDeletesSuccessor,
    "fence-first-of-batch": FenceFirstOfBatch,
}


@dataclass(frozen=True)
class DefectiveOpener:
    """A picklable ``LocationOpener`` over one file with one seeded defect."""

    path: str
    defect: str

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        store = _CLASSES[self.defect](self.path, ttl_ms=ttl_ms or 60_000, now=now)
        return OpenedStore(
            journal=store, transcripts=store.transcripts(), closers=(store.close,)
        )
