"""Broken SQLite stores: durability of blob-only batches or of close(), and the file's identity.

Each is the real ``SqliteStore`` with one plausible bug; open them through
``_broken_sqlite.sqlite_locations``. Journal appends alone, and a store never
closed under its writers, behave as the honest store does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._group_commit import GroupCommitter, _wake_decided
from rulvar_store_sqlite._transaction import Operation
from tests.conformance.selftests._broken_batching import _AcksBeforeCommitDoor

__all__ = [
    "BlobBatchAcksBeforeCommit",
    "CloseAnswersQueuedDone",
    "FileIdentityCheckedOnce",
]


class _BlobAcksBeforeCommitDoor(_AcksBeforeCommitDoor):
    """Answers blob operations as soon as they are applied; journal writes as usual."""

    def _acknowledging(
        self, op: Operation[Any], mutate: Callable[[apsw.Cursor], Any]
    ) -> Callable[[apsw.Cursor], Any]:
        # The bug: "blobs are only bytes, the journal is what matters" - a batch
        # of blobs answers its callers before its COMMIT; journal writes wait.
        if not op.name.startswith("blob_"):
            return mutate
        return super()._acknowledging(op, mutate)


class BlobBatchAcksBeforeCommit(SqliteStore):
    """Group commit that acknowledges blob writes (put, put_many) before COMMIT."""

    _door_type = _BlobAcksBeforeCommitDoor


class _AnswersQueuedDoneDoor(GroupCommitter):
    """A close that empties the queue and tells every queued caller it is done."""

    def close(self) -> None:
        with self._mutex:
            dropped, self._queue = self._queue, []
        for op in dropped:
            # The bug: "we are closing, nothing more will run; let them go" -
            # answered as success instead of StoreClosedError.
            op.succeed(None)
        _wake_decided(dropped)
        super().close()


class CloseAnswersQueuedDone(SqliteStore):
    """close() drops the writes queued behind the running batch and reports them done."""

    _door_type = _AnswersQueuedDoneDoor


class _CheckedOnce:
    """The door's file identity, checked at the first write only ("it cannot change")."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._checked = False

    def check(self, operation: str) -> None:
        if not self._checked:
            self._inner.check(operation)
            self._checked = True


class _IdentityOnceDoor(GroupCommitter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.file = _CheckedOnce(self.file)  # type: ignore[assignment]


class FileIdentityCheckedOnce(SqliteStore):
    """Checks that the path still names its database file at the first write only."""

    _door_type = _IdentityOnceDoor
