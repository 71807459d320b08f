"""LangGraph threads in ``rulvar runs``: name them by thread id, show their status.

Reads only, and no LangGraph import: the layout and the status rules live in
``rulvar_store._threads``. A thread's status costs two small reads when listed
(its lease row and its newest root checkpoint's ref), never a write by the
saver per checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from rulvar_store import OpenedStore
from rulvar_store.backend import has_last_ref, is_safe_token
from rulvar_store.errors import InvalidArgumentError
from rulvar_store.ops import (
    ThreadView,
    has_lease_peek,
    is_thread_meta,
    root_checkpoint_prefix,
    run_for_thread,
    split_checkpoint_ref,
    thread_view,
)

__all__ = [
    "RUN_STATUS_OF",
    "Named",
    "describe_thread",
    "matches_status",
    "newest_root_checkpoint",
    "resolve",
    "shown_id",
]

RUN_STATUS_OF: Final = {
    "running": "running",
    "interrupted": "suspended",
    "finished": "ok",
    "failed": "error",
}
"""A thread status and the run status (TS ``RunStatus``) it corresponds to."""


def newest_root_checkpoint(opened: OpenedStore, run_id: str) -> str | None:
    """The greatest checkpoint id of the thread's root namespace (one indexed read)."""
    prefix = root_checkpoint_prefix(run_id)
    blobs = opened.transcripts
    if has_last_ref(blobs):
        ref: str | None = blobs.last_ref(run_id, prefix)  # type: ignore[attr-defined]  # has_last_ref saw it
        if ref is None:
            return None
        found = split_checkpoint_ref(ref)
        if found is not None:
            return found
    ids = (
        cid
        for ref in blobs.list_refs(run_id)
        if ref.startswith(prefix) and (cid := split_checkpoint_ref(ref)) is not None
    )
    return max(ids, default=None)


def describe_thread(opened: OpenedStore, run_id: str, meta: Any) -> ThreadView | None:
    """The thread's view, or ``None`` if the meta is not a LangGraph thread's."""
    if not is_thread_meta(meta):
        return None
    journal = opened.journal
    lease = journal.peek_lease(run_id) if has_lease_peek(journal) else None
    return thread_view(meta, lease, newest_root_checkpoint(opened, run_id))


def shown_id(run_id: str, meta: Any) -> str:
    """What the operator sees in the RUN column: a thread's own id, else the run id."""
    return str(meta["threadId"]) if is_thread_meta(meta) else run_id


def matches_status(statuses: Sequence[str], meta: Any, view: ThreadView | None) -> bool:
    """``--status``: a thread by its shown status or the run status it stands for."""
    if view is not None:
        return view.status in statuses or RUN_STATUS_OF.get(view.status) in statuses
    return isinstance(meta, dict) and meta.get("status") in statuses


@dataclass(frozen=True, slots=True)
class Named:
    """An id the operator gave, and the run it names (``None``: why not, in ``problem``)."""

    given: str
    run_id: str | None
    problem: str | None = None
    ambiguous: bool = False


def _exists(opened: OpenedStore, run_id: str) -> bool:
    from rulvar_cli._show import run_exists

    return is_safe_token(run_id) and run_exists(opened, run_id)


def _missing(given: str, kind: str | None) -> str:
    if kind == "thread":
        return f"no LangGraph thread {given!r} in this store"
    if kind == "run":
        return f"no run {given!r} in this store"
    return f"no run {given!r} in this store (nor a LangGraph thread of that id)"


def resolve(opened: OpenedStore, given: str, kind: str | None = None) -> Named:
    """The run ``given`` names: a run id, or a LangGraph thread id (``kind`` forces one).

    Without ``kind``, a name that is both an existing run's id and another
    existing thread's id is ambiguous: the caller asks for ``--run`` or
    ``--thread``.
    """
    as_run = given if kind in (None, "run") and is_safe_token(given) else None
    as_thread: str | None = None
    if kind in (None, "thread"):
        try:
            as_thread = run_for_thread(given)
        except InvalidArgumentError as exc:
            if kind == "thread":
                return Named(given, None, f"{given!r} is not a thread id: {exc}")
    candidates = list(dict.fromkeys(c for c in (as_run, as_thread) if c is not None))
    found = [c for c in candidates if _exists(opened, c)]
    if not found:
        return Named(given, None, _missing(given, kind))
    if len(found) > 1:
        return Named(
            given,
            None,
            f"names both the run {given!r} and the LangGraph thread {given!r} "
            f"(run {as_thread!r}); say which with --run or --thread",
            ambiguous=True,
        )
    return Named(given, found[0])
