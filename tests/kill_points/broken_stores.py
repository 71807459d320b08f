"""Deliberately broken SQLite stores for the store-level kill-point self-test.

Not a test module: the self-test imports it, and so does the spawned child (the
test puts this directory on the child's PYTHONPATH), because the opener pickles
by reference. Each store splits one mutation into two transactions, so a death
between them leaves a state that is neither the old nor the new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import apsw

from rulvar_store import Lease, OpenedStore
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite import _sql as sql


class TwoTransactionMetaStore(SqliteStore):
    """put_meta writes status and runId first, the rest of the record in a second commit."""

    def put_meta(self, meta: dict[str, Any], lease: Lease | None = None) -> None:
        head = {"runId": meta["runId"], "status": meta["status"], "updatedAt": ""}
        super().put_meta(head, lease)
        super().put_meta(meta, lease)


class PayloadAfterSeqStore(SqliteStore):
    """append commits the seq (the guard's input) first and the payload afterwards."""

    def append(
        self, run_id: str, entry: dict[str, Any], lease: Lease | None = None
    ) -> None:
        super().append(run_id, {"seq": entry.get("seq")}, lease)

        def fill(cursor: apsw.Cursor) -> None:
            cursor.execute(
                "UPDATE entries SET payload = ? WHERE id = "
                "(SELECT max(id) FROM entries WHERE run_id = ?)",
                (json.dumps(entry, separators=(",", ":")), run_id),
            )

        self._door.write("append", self._fence(lease), fill)


class TwoTransactionDeleteStore(SqliteStore):
    """delete removes the entries in one commit and meta plus lease row in another."""

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self._door.write(
            "delete",
            self._fence(lease),
            lambda cursor: cursor.execute(sql.DELETE_ENTRIES, (run_id,)),
        )
        super().delete(run_id, lease)


BROKEN = {
    "two-transaction-meta": TwoTransactionMetaStore,
    "payload-after-seq": PayloadAfterSeqStore,
    "two-transaction-delete": TwoTransactionDeleteStore,
    "honest": SqliteStore,
}


@dataclass(frozen=True)
class BrokenOpener:
    """Opens ``BROKEN[kind]`` on one file; picklable by reference."""

    path: str
    kind: str

    def __call__(self, ttl_ms: int | None, now: Any, fail_fast: bool) -> OpenedStore:
        options: dict[str, Any] = {"busy_timeout_ms": 100 if fail_fast else 5_000}
        if ttl_ms is not None:
            options["ttl_ms"] = ttl_ms
        if now is not None:
            options["now"] = now
        store = BROKEN[self.kind](self.path, **options)
        return OpenedStore(
            journal=store, transcripts=store.transcripts(), closers=(store.close,)
        )
