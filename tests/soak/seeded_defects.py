"""Stores with one seeded defect each, for the soak that must bite.

SQLite stores with a fencing defect each, and a PostgreSQL opener whose store
acknowledges appends the server never received (for the server-crash soak).

They live in an importable module (not a test body) because the soak's writer
processes unpickle the location's opener and import this module by name.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Final

from rulvar_store import (
    Clock,
    JournalEntry,
    Lease,
    LeaseHeldError,
    OpenedStore,
    StoreUnavailableError,
)
from rulvar_store.backend import UrlOpener
from rulvar_store_sqlite import SqliteStore

# Defects the kit's self-tests use too. FenceFirstOfBatch is a group-commit defect
# only companion threads expose; UnpinnedRelease deletes the run's lease row on a
# release without any fence, so a stale release deletes its successor's lease (F3).
from tests.conformance.selftests._broken_sqlite import (
    FenceFirstOfBatch,
    UnpinnedRelease,
)

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


_CLASSES: Final = {
    "expired-lease-accepted": ExpiredLeaseAccepted,
    "stale-release-deletes-successor": UnpinnedRelease,
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


@dataclass(frozen=True)
class AcksWhenUnavailableOpener:
    """Opens a fresh PostgreSQL location whose journal acknowledges appends the
    server never got (``StoreUnavailableError`` swallowed): the seeded defect.

    ``PostgresStore`` is final, so the opened handle's ``append`` is replaced.
    """

    inner: UrlOpener

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        opened = self.inner(ttl_ms, now, fail_fast)
        honest = opened.journal.append

        def append(
            run_id: str, entry: JournalEntry, lease: Lease | None = None
        ) -> None:
            # The defect: the caller is told its write landed.
            with contextlib.suppress(StoreUnavailableError):
                honest(run_id, entry, lease)

        opened.journal.append = append  # type: ignore[method-assign]  # the seeded defect
        return opened
