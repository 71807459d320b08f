"""Reads for operator tooling: runs page by page, and a look at a lease without taking it.

Two optional abilities a store may offer beside the SPI, each read through one
helper (``has_meta_pages``, ``has_lease_peek``):

- ``meta_page(after, limit)`` returns up to ``limit`` ``(run_id, meta_text)`` pairs
  ordered by run id, strictly after ``after``, unparsed. An audit over 10 000
  runs then holds one page at a time, and a meta row that is not JSON reaches the
  caller as text (a diagnostic for that run) instead of failing the whole listing.
- ``peek_lease(run_id)`` returns the lease row as it stands, read with one plain
  statement: no lease is taken, no epoch moves.

``iter_listed_runs`` walks every run of any store: by pages where offered, by
directory for the file store (so one corrupt meta file stays that run's
problem), and through ``list_runs`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeGuard, runtime_checkable

from rulvar_store._json import load_record
from rulvar_store._protocols import JournalStore
from rulvar_store._records import RunFilter, RunMeta, meta_matches_filter
from rulvar_store.errors import ContractError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "LeasePeek",
    "LeaseState",
    "ListedRun",
    "MetaPages",
    "RunIdListing",
    "checked_meta",
    "has_lease_peek",
    "has_meta_pages",
    "has_run_id_listing",
    "iter_listed_runs",
    "parse_meta_text",
]

DEFAULT_PAGE_SIZE: Final = 500


@dataclass(frozen=True, slots=True)
class LeaseState:
    """A run's lease row as read, and the store clock's reading at that moment.

    ``now`` is the clock the store decides expiry with (the database server's for
    PostgreSQL), so ``live`` agrees with what an ``acquire`` would have found.
    """

    run_id: str
    owner: str
    epoch: int
    expires_at: int
    now: int

    @property
    def live(self) -> bool:
        """Whether the lease is live (``expires_at > now``, section 3)."""
        return self.expires_at > self.now


@runtime_checkable
class MetaPages(Protocol):
    def meta_page(self, after: str | None, limit: int) -> list[tuple[str, str]]: ...


@runtime_checkable
class LeasePeek(Protocol):
    def peek_lease(self, run_id: str) -> LeaseState | None: ...


@runtime_checkable
class RunIdListing(Protocol):
    """A store that names its runs cheaply, so a listing reads one meta at a time.

    The file store declares it; the listing asks for the capability instead of
    testing for a class, so another store may declare it too.
    """

    def run_ids(self) -> list[str]: ...

    def get_meta(self, run_id: str) -> RunMeta | None: ...


def has_run_id_listing(store: object) -> TypeGuard[RunIdListing]:
    """Return whether ``store`` lists its run ids without reading their metas."""
    return isinstance(store, RunIdListing)


def has_meta_pages(store: object) -> TypeGuard[MetaPages]:
    """Return whether ``store`` pages through its metas as text (``meta_page``)."""
    return isinstance(store, MetaPages)


def has_lease_peek(store: object) -> TypeGuard[LeasePeek]:
    """Return whether ``store`` can show a lease row without taking it."""
    return isinstance(store, LeasePeek)


@dataclass(frozen=True, slots=True)
class ListedRun:
    """One run of a listing: its meta, or why the meta could not be read."""

    run_id: str
    meta: RunMeta | None
    problem: str | None = None


def parse_meta_text(run_id: str, text: str | bytes) -> ListedRun:
    """Parse a stored meta record; a malformed one becomes ``problem``, never raises."""
    try:
        meta: Any = load_record(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return ListedRun(run_id, None, f"meta is not valid JSON ({exc})")
    return checked_meta(run_id, meta)


def checked_meta(run_id: str, meta: Any) -> ListedRun:
    """Check the shape the audit relies on: an object with a string ``status``."""
    if not isinstance(meta, dict):
        return ListedRun(
            run_id, None, f"meta is a JSON {type(meta).__name__}, not an object"
        )
    if not isinstance(meta.get("status"), str):
        return ListedRun(
            run_id, None, f"meta has no string status (got {meta.get('status')!r})"
        )
    return ListedRun(run_id, meta)


def _wanted(listed: ListedRun, run_filter: RunFilter | None) -> bool:
    # A run whose meta cannot be read matches no filter but is always shown: an
    # operator filtering by status must still learn that a row is broken.
    return listed.meta is None or meta_matches_filter(listed.meta, run_filter)


def _paged(
    store: MetaPages, run_filter: RunFilter | None, page_size: int
) -> Iterator[ListedRun]:
    after: str | None = None
    while True:
        page = store.meta_page(after, page_size)
        for run_id, text in page:
            listed = parse_meta_text(run_id, text)
            if _wanted(listed, run_filter):
                yield listed
        if len(page) < page_size:
            return
        after = page[-1][0]


def _named_runs(
    store: RunIdListing, run_filter: RunFilter | None
) -> Iterator[ListedRun]:
    """A store that names its runs (the file store): one meta read at a time."""
    for name in store.run_ids():
        try:
            meta = store.get_meta(name)
        except ContractError as exc:  # CorruptFileError: that run's problem only
            yield ListedRun(name, None, str(exc))
            continue
        if meta is None:
            continue
        listed = checked_meta(name, meta)
        if _wanted(listed, run_filter):
            yield listed


def iter_listed_runs(
    store: JournalStore,
    run_filter: RunFilter | None = None,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Iterator[ListedRun]:
    """Yield every run with a meta record, ordered by run id, matching ``run_filter``.

    Runs whose meta cannot be read are yielded too, with ``problem`` set. Holds
    one page of metas at a time on stores with ``meta_page``; others are read
    through ``list_runs`` (the memory store) or per run directory (the file store).

    Raises:
        StoreBusyError, StoreUnavailableError: the store did not answer.
    """
    if has_meta_pages(store):
        yield from _paged(store, run_filter, page_size)
    elif has_run_id_listing(store):
        yield from _named_runs(store, run_filter)
    else:
        for meta in store.list_runs(run_filter):
            run_id = meta.get("runId") if isinstance(meta, dict) else None
            yield checked_meta(run_id if isinstance(run_id, str) else "?", meta)
