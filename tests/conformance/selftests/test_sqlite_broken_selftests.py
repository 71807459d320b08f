"""C4 self-tests on a real backend: the SQLite store with one plausible SQL bug each.

Each broken store subclasses ``SqliteStore`` and changes one statement the way a
store author could get it wrong; certified through the registry over real
database files (two handles per location, an injected clock), the named check
must fail. This proves the edge suites catch the bug where it would really live,
not only in the in-memory model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import apsw
import pytest

from rulvar_store import (
    Clock,
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    OpenedStore,
)
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    check_run_match,
    finite_seq,
)
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._transcripts import SqliteFencedTranscriptStore
from tests.conformance.selftests._broken_sqlite import UnpinnedRelease
from tests.conformance.selftests._support import check_result


class InclusiveFence(SqliteStore):
    """The live-lease check reads ``expires_at >= now``: a lease is live at its expiry."""

    def _assert_fencing(self, lease: Lease) -> None:
        rows = self._cursor.execute(
            "SELECT 1 FROM leases WHERE run_id = ? AND owner = ? AND epoch = ? "
            "AND expires_at >= ?",
            (lease.run_id, lease.owner, lease.epoch, self._now()),
        ).fetchall()
        if not rows:
            raise LeaseHeldError(
                "not the live lease", lease.run_id, lease.owner, lease.epoch
            )


class TruncatingGuard(SqliteStore):
    """The J6 guard compares seqs through ``CAST(... AS INTEGER)`` only."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        seq = finite_seq(entry)
        if seq is None:
            super().append(run_id, entry, lease)
            return
        check_run_match(lease, run_id, "append")
        text = __import__("json").dumps(
            entry, ensure_ascii=False, separators=(",", ":")
        )

        def mutate(cursor: apsw.Cursor) -> None:
            cursor.execute(
                "INSERT INTO entries (run_id, payload) SELECT ?1, ?2 WHERE NOT EXISTS "
                "(SELECT 1 FROM entries WHERE run_id = ?1 AND "
                "CAST(json_extract(payload, '$.seq') AS INTEGER) >= CAST(?3 AS INTEGER))",
                (run_id, text, seq),
            )
            if self._conn.changes() == 0:
                raise JournalOrderViolation("seq not above the tail", run_id, seq)

        self._door.write("append", self._fence(lease), mutate)


class LikeRefsTwin:
    """The store's real twin, but ``list_refs`` matches ``LIKE run_id || '/%'``."""

    def __init__(self, twin: SqliteFencedTranscriptStore, store: SqliteStore) -> None:
        self._twin = twin
        self._store = store
        self.fenced_writes = True
        self.put, self.get, self.delete = twin.put, twin.get, twin.delete

    def list_refs(self, run_id: str) -> list[str]:
        rows = self._store._door.read(
            "blob_list",
            "SELECT ref FROM blobs WHERE ref LIKE ? || '/%' ORDER BY ref",
            (run_id,),
        )
        return [str(row[0]) for row in rows]

    def close(self) -> None:
        """The store closes the twin."""


class LikeRefs(SqliteStore):
    """list_refs uses LIKE without escaping the run id's ``_`` and ``%``."""

    def transcripts(self) -> LikeRefsTwin:  # type: ignore[override]  # a duck-typed twin
        if not hasattr(self, "_like_twin"):
            self._like_twin = LikeRefsTwin(super().transcripts(), self)
        return self._like_twin


def sqlite_locations(
    store_class: type[SqliteStore], directory: Path
) -> LocationFactory:
    numbers = iter(range(1_000_000))

    def fresh() -> StoreLocation:
        path = str(directory / f"broken-{next(numbers)}.db")

        def opener(
            ttl_ms: int | None, now: Clock | None, fail_fast: bool
        ) -> OpenedStore:
            store = store_class(path, ttl_ms=ttl_ms or 60_000, now=now)
            return OpenedStore(store, store.transcripts(), (store.close,))

        def cleanup() -> None:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)

        return StoreLocation(name=path, opener=opener, processes=False, cleanup=cleanup)

    return fresh


BROKEN: Final[tuple[tuple[type[SqliteStore], str, str], ...]] = (
    (InclusiveFence, "lease-lifetime", "lease-expiry-boundary"),
    (UnpinnedRelease, "stale-surfaces", "stale-release-refused"),
    (TruncatingGuard, "data-edges", "data-float-and-huge-seq"),
    (LikeRefs, "data-edges", "data-list-refs-exact"),
)

SELF_TESTED: Final = frozenset(check_id for _, _, check_id in BROKEN)


def _result(
    store_class: type[SqliteStore], suite: str, check_id: str, where: Path
) -> str:
    result = check_result(sqlite_locations(store_class, where), suite, check_id)
    return result.status if result.status != "failed" else f"failed: {result.error}"


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("broken", "suite", "check_id"),
    [pytest.param(cls, suite, cid, id=cls.__name__) for cls, suite, cid in BROKEN],
)
def test_broken_sqlite_store_fails_the_named_check(
    broken: type[SqliteStore], suite: str, check_id: str, tmp_path: Path
) -> None:
    """The SQLite store with one SQL bug fails the check written for that bug."""
    status = _result(broken, suite, check_id, tmp_path)
    assert status.startswith(f"failed: store-conformance {check_id}: "), status


@pytest.mark.clause("C4")
@pytest.mark.parametrize(
    ("suite", "check_id"), sorted({(suite, cid) for _, suite, cid in BROKEN})
)
def test_honest_sqlite_store_passes(suite: str, check_id: str, tmp_path: Path) -> None:
    """Control: the unmodified SqliteStore passes each of those checks."""
    assert _result(SqliteStore, suite, check_id, tmp_path) == "passed"
