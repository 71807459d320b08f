"""Orphans: journals without a meta row, and blobs of runs with neither (V11).

A crash between a run's first append and its first meta write leaves a journal
no listing shows (``list_runs`` reads metas only, M1); a run deleted by a tool
that skipped its blobs leaves blobs nobody lists. The audit reports both as
``suspect`` (A2: a meta is never fabricated; A3: suspects are never rewritten),
so ``runs audit --repair`` leaves them and says so; ``runs delete RUN`` removes
one for good.

Finding them needs an optional ability of the journal store, read through
``has_orphan_listing``: ``orphan_page(kind, after, limit)`` returns up to
``limit`` run ids after ``after``, in run id order, of ``"journal"`` orphans
(entries, no meta) or ``"blobs"`` orphans (blobs, no entries, no meta). The
memory, SQLite and PostgreSQL stores offer it; the file store names its run
folders instead (``run_ids``), so its orphan journals are found too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeGuard, runtime_checkable

from rulvar_store._observe import has_run_id_listing
from rulvar_store.errors import ContractError

__all__ = [
    "Orphan",
    "OrphanKind",
    "OrphanListing",
    "has_orphan_listing",
    "iter_orphans",
]

OrphanKind = Literal["journal", "blobs"]
_PAGE: Final = 500


@runtime_checkable
class OrphanListing(Protocol):
    def orphan_page(
        self, kind: OrphanKind, after: str | None, limit: int
    ) -> list[str]: ...


def has_orphan_listing(store: object) -> TypeGuard[OrphanListing]:
    """Return whether ``store`` lists its orphan journals and blobs (``orphan_page``)."""
    return isinstance(store, OrphanListing)


@dataclass(frozen=True, slots=True)
class Orphan:
    """One orphan: the run id, which kind, and what an operator reads about it."""

    run_id: str
    kind: OrphanKind

    @property
    def reason(self) -> str:
        if self.kind == "journal":
            return (
                "journal without a meta (a crash before the first meta write?); "
                "never fabricated: 'rulvar runs delete' removes it"
            )
        return "blobs without a journal or meta; 'rulvar runs delete' removes them"


def _pages(store: OrphanListing, kind: OrphanKind) -> Iterator[str]:
    after: str | None = None
    while True:
        page = store.orphan_page(kind, after, _PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1]


def iter_orphans(store: object) -> Iterator[Orphan]:
    """Yield the store's orphans: journals first, then blobs, each in run id order.

    Stores without the ability yield what they can (the file store: journals
    by folder) or nothing.
    """
    if has_orphan_listing(store):
        for kind in ("journal", "blobs"):
            for run_id in _pages(store, kind):
                yield Orphan(run_id, kind)
        return
    if has_run_id_listing(store):
        load = getattr(store, "load", None)
        for run_id in store.run_ids():
            try:
                orphan = (
                    store.get_meta(run_id) is None and callable(load) and load(run_id)
                )
            except ContractError:  # unreadable: the listing reports that run already
                continue
            if orphan:
                yield Orphan(run_id, "journal")
