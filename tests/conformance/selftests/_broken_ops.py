"""Broken operator tools for the operator-tools suite's walks (R5-R7).

The tools live in ``rulvar_store`` and run over any store, so their slips are
seeded where they are: each function here replaces one step of the real tools
(the self-test patches it in for the one test) with a plausible bug.

White-box: rulvar_store._audit, rulvar_store._observe, rulvar_store._retention (the steps patched)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rulvar_store import (
    JournalStore,
    Lease,
    LeaseHeldError,
    TranscriptStore,
    _audit,
    _observe,
    _retention,
)
from rulvar_store._observe import ListedRun, parse_meta_text

__all__ = ["audit_under_brief_lease", "delete_without_lease", "first_page_only"]

_honest_audit = _audit._audit_listed
_honest_delete = _retention.delete_run


def first_page_only(store: Any, run_filter: Any, page_size: int) -> Iterator[ListedRun]:
    """The pager with the bug: a full first page is taken for the whole listing."""
    for run_id, text in store.meta_page(None, page_size):
        listed = parse_meta_text(run_id, text)
        if _observe._wanted(listed, run_filter):
            yield listed


def audit_under_brief_lease(store: JournalStore, listed: ListedRun) -> Any:
    """An audit that takes a brief lease "for a consistent snapshot" of each run."""
    journal: Any = store
    try:
        lease: Lease = journal.acquire(listed.run_id, "rulvar-audit")
    except LeaseHeldError:
        return _honest_audit(store, listed)
    try:
        return _honest_audit(store, listed)
    finally:
        journal.release(lease)


def delete_without_lease(
    journal: JournalStore,
    transcripts: TranscriptStore,
    run_id: str,
    *,
    lease: Lease | None = None,
) -> None:
    """The sweep's delete, run without the brief lease it took ("we checked already")."""
    _honest_delete(journal, transcripts, run_id, lease=None)
