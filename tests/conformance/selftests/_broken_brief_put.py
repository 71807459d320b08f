"""Broken SQLite ``brief_put`` paths (L16) for the kit's LangGraph ownership checks.

An unheld LangGraph ``put`` over SQLite is one ``brief_put``; each store here
is the honest ``SqliteStore`` with one slip in it, a shortcut that looks
harmless inside one transaction.
"""

from __future__ import annotations

from rulvar_store.backend import BriefPutArgs
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._brief_put import brief_put_op
from rulvar_store_sqlite._transaction import Operation

__all__ = ["BriefPutIgnoresLiveLease", "BriefPutIgnoresNeedPrior"]


class BriefPutIgnoresLiveLease(SqliteStore):
    """Skips acquire's check ("the put is brief anyway"): writes under a live hold."""

    def _brief_put_op(
        self, put: BriefPutArgs, meta_replaces: bool, need_prior: bool
    ) -> Operation[bool]:
        return brief_put_op(put, lambda: False, meta_replaces, need_prior)


class BriefPutIgnoresNeedPrior(SqliteStore):
    """Writes whether or not a prior checkpoint exists: a late put revives a deleted thread."""

    def _brief_put_op(
        self, put: BriefPutArgs, meta_replaces: bool, need_prior: bool
    ) -> Operation[bool]:
        return super()._brief_put_op(put, meta_replaces, False)
