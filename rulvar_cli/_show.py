"""``rulvar runs show``: gather one run's state with reads only, and print it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Final

import click

from rulvar_cli._operator import sanitize
from rulvar_store import OpenedStore
from rulvar_store.backend import finite_seq
from rulvar_store.errors import ContractError
from rulvar_store.ops import (
    audit_entries,
    checked_meta,
    has_lease_peek,
    journal_shape_problem,
)

__all__ = ["describe_run", "print_run", "run_exists"]

_ENTRY_WIDTH: Final = 160


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def run_exists(opened: OpenedStore, run_id: str) -> bool:
    """Whether the run has a meta, a journal entry or a blob (reads only)."""
    from rulvar_store import read_run_meta

    return (
        read_run_meta(opened.journal, run_id) is not None
        or bool(opened.journal.load(run_id))
        or bool(opened.transcripts.list_refs(run_id))
    )


def _lease(opened: OpenedStore, run_id: str) -> dict[str, Any] | str | None:
    journal = opened.journal
    if not has_lease_peek(journal):
        return "not inspectable on this store"
    state = journal.peek_lease(run_id)
    if state is None:
        return None
    return {
        "owner": state.owner,
        "epoch": state.epoch,
        "expiresAt": _iso(state.expires_at),
        "live": state.live,
        "remainingMs": max(0, state.expires_at - state.now),
    }


def describe_run(
    opened: OpenedStore, run_id: str, tail_size: int
) -> dict[str, Any] | None:
    """Return a JSON-ready report of the run, or ``None`` if the store has no trace of it.

    Reads only. A meta or journal that cannot be read is reported (audit verdict
    ``unreadable``), not raised.
    """
    from rulvar_store import read_run_meta

    problem: str | None = None
    meta: Any = None
    try:
        meta = read_run_meta(opened.journal, run_id)
    except (ContractError, ValueError, TypeError) as exc:
        problem = f"meta unreadable: {type(exc).__name__}: {exc}"
    entries: list[dict[str, Any]] = []
    try:
        entries = opened.journal.load(run_id)
    except (ContractError, ValueError, TypeError) as exc:
        problem = problem or f"journal unreadable: {type(exc).__name__}: {exc}"
    problem = problem or journal_shape_problem(entries)
    refs = opened.transcripts.list_refs(run_id)
    if meta is None and problem is None and not entries and not refs:
        return None
    if meta is not None and problem is None:
        listed = checked_meta(run_id, meta)
        problem = listed.problem
    audit: dict[str, Any]
    if problem is not None:
        audit = {"verdict": "unreadable", "reason": problem}
    else:
        try:
            audit = audit_entries(run_id, meta, entries).to_json()
        except (ContractError, ValueError, TypeError, KeyError) as exc:
            audit = {"verdict": "unreadable", "reason": f"journal does not fold: {exc}"}
    from rulvar_cli._threads import describe_thread

    view = describe_thread(opened, run_id, meta) if problem is None else None
    blobs = []
    for ref in refs:
        data = opened.transcripts.get(ref)
        blobs.append({"ref": ref, "bytes": None if data is None else len(data)})
    return {
        "runId": run_id,
        "threadId": None if view is None else view.thread_id,
        "thread": None if view is None else view.to_json(),
        "meta": meta,
        "lease": _lease(opened, run_id),
        "journalEntries": len(entries),
        "tail": entries[-tail_size:] if tail_size else [],
        "danglingSeqs": [] if problem else _dangling_seqs(entries),
        "audit": audit,
        "blobs": blobs,
    }


def _dangling_seqs(entries: list[dict[str, Any]]) -> list[Any]:
    """The seqs ``dangling_dispatches`` counts (``None`` for one without a seq)."""
    referenced = {
        entry["ref"]
        for entry in entries
        if isinstance(entry.get("ref"), int | float)
        and not isinstance(entry.get("ref"), bool)
    }
    return [
        finite_seq(entry)
        for entry in entries
        if entry.get("status") == "running" and finite_seq(entry) not in referenced
    ]


def _line(value: Any) -> str:
    text = sanitize(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return text if len(text) <= _ENTRY_WIDTH else text[: _ENTRY_WIDTH - 3] + "..."


def print_run(report: dict[str, Any]) -> None:
    """Print a ``describe_run`` report for a terminal; store text is sanitized."""
    echo = click.echo
    echo(f"run      {sanitize(report['runId'])}")
    thread = report.get("thread")
    if thread is not None:
        echo(
            f"thread   {sanitize(thread['threadId'])}: {thread['status']} "
            f"({sanitize(thread['reason'])}), updated {thread['updatedAt'] or '-'}"
        )
    meta = report["meta"]
    echo("meta     " + ("(none)" if meta is None else _line(meta)))
    lease = report["lease"]
    if lease is None:
        echo("lease    (none)")
    elif isinstance(lease, str):
        echo(f"lease    ({lease})")
    else:
        state = (
            f"live, {lease['remainingMs'] / 1000:.1f} s left"
            if lease["live"]
            else "expired"
        )
        echo(
            f"lease    {sanitize(lease['owner'])} epoch {lease['epoch']}, "
            f"expires {lease['expiresAt']} ({state})"
        )
    audit = report["audit"]
    settle = audit.get("journalSettle")
    echo(f"journal  {report['journalEntries']} entries")
    echo(
        "settle   "
        + ("(none)" if not settle else f"{settle['runStatus']} at seq {settle['seq']}")
    )
    dangling = report["danglingSeqs"]
    echo(
        f"dangling {len(dangling)}"
        + (f" (seqs {', '.join(map(str, dangling))})" if dangling else "")
    )
    echo(f"audit    {audit['verdict']}: {sanitize(audit['reason'])}")
    echo(f"blobs    {len(report['blobs'])}")
    for blob in report["blobs"]:
        size = "missing" if blob["bytes"] is None else f"{blob['bytes']} bytes"
        echo(f"  {sanitize(blob['ref'])}  {size}")
    if report["tail"]:
        echo(f"tail     last {len(report['tail'])} entries")
        for entry in report["tail"]:
            echo(f"  {_line(entry)}")
