"""Audit and reconcile of a run's meta against its journal (CONTRACT 11).

``last_run_settle`` finds what the journal says a run settled as (the kill-point
driver uses it to write a settle only on change, A8). ``audit_run`` derives the
status a run's meta should show and names the verdict (A2) without writing;
``reconcile_run_meta`` rewrites only a ``meta-behind`` or ``stranded`` meta, with
the lease, keeping every other key (A3, A4). ``iter_run_audits`` walks a store
one run at a time, so an audit over 10 000 runs holds one journal at a time.

A run that cannot be read (a journal line that is not JSON, a meta row of the
wrong shape, refs the C5 fold rejects) gets the verdict ``unreadable`` with the
reason: a diagnostic for that run, never an exception that ends the pass.
Transient store faults (``StoreBusyError``, ``StoreUnavailableError``) still
propagate: they are about the store, not the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from rulvar_store._fold import fold_journal
from rulvar_store._observe import ListedRun, checked_meta, iter_listed_runs
from rulvar_store._protocols import JournalStore
from rulvar_store._records import (
    Clock,
    JournalEntry,
    Lease,
    RunFilter,
    RunMeta,
    finite_seq,
    system_clock_ms,
)
from rulvar_store.errors import ContractError

__all__ = [
    "RUN_STATUSES",
    "TERMINAL_RUN_STATUSES",
    "ReconcileResult",
    "RunStateAudit",
    "SettleRef",
    "Verdict",
    "audit_entries",
    "audit_run",
    "audit_runs",
    "dangling_dispatches",
    "iter_run_audits",
    "journal_shape_problem",
    "last_run_settle",
    "reconcile_run_meta",
]

Verdict = Literal["consistent", "meta-behind", "stranded", "suspect", "unreadable"]
REPAIRABLE: Final = frozenset({"meta-behind", "stranded"})

RUN_STATUSES: Final = frozenset(
    {"running", "suspended", "ok", "error", "cancelled", "exhausted"}
)
TERMINAL_RUN_STATUSES: Final = frozenset({"ok", "error", "cancelled", "exhausted"})


@dataclass(frozen=True, slots=True)
class SettleRef:
    """The run status a ``run_settle`` decision recorded, and that entry's seq."""

    run_status: str
    seq: int


def _settled_status(entry: JournalEntry) -> str | None:
    if entry.get("kind") != "decision":
        return None
    value = entry.get("value")
    if not isinstance(value, dict) or value.get("decisionType") != "run_settle":
        return None
    status = value.get("runStatus")
    return status if isinstance(status, str) and status in RUN_STATUSES else None


def last_run_settle(entries: Sequence[JournalEntry]) -> SettleRef | None:
    """Return the LAST ``run_settle`` decision with a valid run status (A1), or None."""
    for entry in reversed(entries):
        status = _settled_status(entry)
        seq = entry.get("seq")
        if status is not None and isinstance(seq, int) and not isinstance(seq, bool):
            return SettleRef(status, seq)
    return None


def dangling_dispatches(entries: Sequence[JournalEntry]) -> int:
    """Count ``running`` entries (any kind) whose seq no entry's ``ref`` names (A1).

    A running entry without a finite seq can never be referenced, so it counts.
    """
    referenced = {
        entry["ref"]
        for entry in entries
        if isinstance(entry.get("ref"), int | float)
        and not isinstance(entry.get("ref"), bool)
    }
    return sum(
        1
        for entry in entries
        if entry.get("status") == "running" and finite_seq(entry) not in referenced
    )


@dataclass(frozen=True, slots=True)
class RunStateAudit:
    """What the journal says a run's status is, against what its meta says (A2).

    ``repair_to`` is set only for ``meta-behind`` and ``stranded`` (A3).
    ``unreadable`` (an addition to A2's four verdicts) names a run whose meta or
    journal could not be read; ``reason`` says why, and it is never repaired.
    """

    run_id: str
    verdict: Verdict
    meta: RunMeta | None
    journal_entries: int
    journal_settle: SettleRef | None
    entries_after_settle: int
    dangling_dispatches: int
    open_suspensions: int
    repair_to: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view (``--json`` output); the meta is left out."""
        settle = self.journal_settle
        return {
            "runId": self.run_id,
            "verdict": self.verdict,
            "metaStatus": None if self.meta is None else self.meta.get("status"),
            "journalEntries": self.journal_entries,
            "journalSettle": None
            if settle is None
            else {"runStatus": settle.run_status, "seq": settle.seq},
            "entriesAfterSettle": self.entries_after_settle,
            "danglingDispatches": self.dangling_dispatches,
            "openSuspensions": self.open_suspensions,
            "repairTo": self.repair_to,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    """The audit a repair acted on, and whether it wrote the meta (A4)."""

    audit: RunStateAudit
    repaired: bool


def _unreadable(run_id: str, meta: RunMeta | None, reason: str) -> RunStateAudit:
    return RunStateAudit(run_id, "unreadable", meta, 0, None, 0, 0, 0, None, reason)


def _settle_index(entries: Sequence[JournalEntry], settle: SettleRef) -> int:
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].get("seq") == settle.seq:
            return index
    return len(entries) - 1  # unreachable: the settle came from these entries


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _derive(
    tail: Sequence[JournalEntry], settle: SettleRef, open_suspensions: int
) -> tuple[str, str]:
    """The status the journal implies after its last settle, and why (A2.2)."""
    if dangling_dispatches(tail):
        return "running", "a dispatch after it is still running"
    if tail and open_suspensions:
        return (
            "suspended",
            f"{_count(len(tail), 'entry', 'entries')} after it leave a suspension open",
        )
    if tail:
        return "running", f"{_count(len(tail), 'entry', 'entries')} journaled after it"
    return settle.run_status, "nothing was journaled after it"


def audit_entries(
    run_id: str, meta: RunMeta | None, entries: Sequence[JournalEntry]
) -> RunStateAudit:
    """Audit loaded entries against a meta (A2); pure, no store access.

    A meta that is present must be an object with a string ``status`` (the
    caller checks; see ``checked_meta``).

    Raises:
        JournalOrderViolation: the C5 fold rejects a ``resolution``/``abandon`` ref.
    """
    count = len(entries)
    dangling = dangling_dispatches(entries)
    open_count = len(fold_journal(entries).open_suspensions())
    settle = last_run_settle(entries)
    after = 0 if settle is None else count - 1 - _settle_index(entries, settle)

    def verdict(
        name: Verdict, reason: str, repair_to: str | None = None
    ) -> RunStateAudit:
        return RunStateAudit(
            run_id,
            name,
            meta,
            count,
            settle,
            after,
            dangling,
            open_count,
            repair_to,
            reason,
        )

    if meta is None:  # A2.1: a row is never fabricated
        if count == 0:
            return verdict("consistent", "no meta and an empty journal")
        return verdict(
            "suspect",
            f"no meta but {count} journal entries (crash before the first meta write?)",
        )
    status = str(meta["status"])
    terminal = status in TERMINAL_RUN_STATUSES
    if settle is not None:  # A2.2
        tail = entries[count - after :] if after else ()
        derived, why = _derive(tail, settle, open_count)
        if derived == status:
            return verdict("consistent", f"meta {status!r} matches the journal")
        where = f"the run_settle {settle.run_status!r} at seq {settle.seq}"
        reason = f"meta says {status!r}, journal says {derived!r}: {where}, {why}"
        if terminal and derived not in TERMINAL_RUN_STATUSES:
            return verdict("stranded", reason, derived)
        return verdict("meta-behind", reason, derived)
    if terminal:  # A2.3: journals without a settle
        if dangling:
            return verdict(
                "stranded",
                f"meta says {status!r} but {_count(dangling, 'dispatch', 'dispatches')} still running "
                "and no run_settle was journaled",
                "running",
            )
        if open_count and status in ("ok", "exhausted"):
            return verdict(
                "suspect",
                f"meta says {status!r} but {_count(open_count, 'suspension', 'suspensions')} still open "
                "and no run_settle was journaled",
            )
        return verdict("consistent", f"terminal meta {status!r}, no run_settle")
    return verdict(  # A2.4
        "consistent", f"non-terminal meta {status!r}, no run_settle"
    )


def _audit_listed(store: JournalStore, listed: ListedRun) -> RunStateAudit:
    if listed.problem is not None:
        return _unreadable(listed.run_id, None, listed.problem)
    try:
        entries = store.load(listed.run_id)
    except (ContractError, ValueError, TypeError) as exc:
        # ContractError covers CorruptFileError (a bad JSONL line) and unsafe
        # names; ValueError a stored payload that does not parse.
        return _unreadable(
            listed.run_id, listed.meta, f"journal unreadable: {_describe(exc)}"
        )
    problem = journal_shape_problem(entries)
    if problem is not None:
        return _unreadable(listed.run_id, listed.meta, problem)
    try:
        return audit_entries(listed.run_id, listed.meta, entries)
    except (ContractError, ValueError, TypeError, KeyError) as exc:
        return _unreadable(
            listed.run_id, listed.meta, f"journal does not fold: {_describe(exc)}"
        )


def journal_shape_problem(entries: Sequence[Any]) -> str | None:
    """Name the first loaded entry that is not a JSON object, or None."""
    for index, item in enumerate(entries):
        if not isinstance(item, dict):
            return (
                f"journal entry {index} is a JSON {type(item).__name__}, not an object"
            )
    return None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _read_meta(store: JournalStore, run_id: str) -> ListedRun:
    from rulvar_store._capabilities import read_run_meta

    try:
        meta = read_run_meta(store, run_id)
    except (ContractError, ValueError, TypeError) as exc:
        return ListedRun(run_id, None, f"meta unreadable: {_describe(exc)}")
    if meta is None:
        return ListedRun(run_id, None)
    return checked_meta(run_id, meta)


def audit_run(store: JournalStore, run_id: str) -> RunStateAudit:
    """Audit one run (A2); read-only: loads its meta and journal, writes nothing.

    Raises:
        StoreBusyError, StoreUnavailableError: the store did not answer.
    """
    return _audit_listed(store, _read_meta(store, run_id))


def iter_run_audits(
    store: JournalStore,
    *,
    include_consistent: bool = False,
    run_filter: RunFilter | None = None,
) -> Iterator[RunStateAudit]:
    """Audit every listed run, one at a time, in run-id order (A5); read-only.

    Only one journal (and one page of metas, where the store pages) is held at
    a time. Non-consistent audits only unless ``include_consistent``.

    Raises:
        StoreBusyError, StoreUnavailableError: the store did not answer.
    """
    for listed in iter_listed_runs(store, run_filter):
        audit = _audit_listed(store, listed)
        if include_consistent or audit.verdict != "consistent":
            yield audit
    if run_filter is None:  # an orphan has no meta: it matches no filter
        yield from _orphan_audits(store)


def _orphan_audits(store: JournalStore) -> Iterator[RunStateAudit]:
    """Journals without a meta and blobs without a journal, as ``suspect`` (V11).

    Never repaired (A3): a journal's meta is not fabricated, and blobs are
    removed only by deleting their run (R1).
    """
    from rulvar_store._orphans import iter_orphans

    for orphan in iter_orphans(store):
        if orphan.kind == "journal":
            yield audit_run(store, orphan.run_id)
        else:
            yield RunStateAudit(
                orphan.run_id, "suspect", None, 0, None, 0, 0, 0, None, orphan.reason
            )


def audit_runs(
    store: JournalStore, *, include_consistent: bool = False
) -> list[RunStateAudit]:
    """Audit every run ``list_runs`` lists (A5); non-consistent ones by default.

    The list form of ``iter_run_audits``; prefer that one over many runs.
    """
    return list(iter_run_audits(store, include_consistent=include_consistent))


def _iso_now(clock: Clock) -> str:
    """Unix ms as JavaScript's ``toISOString`` writes it (the hosts' format)."""
    ms = int(clock())
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def reconcile_run_meta(
    store: JournalStore,
    run_id: str,
    *,
    lease: Lease | None = None,
    now: Clock | None = None,
) -> ReconcileResult:
    """Re-audit the run and, for ``meta-behind``/``stranded`` only, rewrite its meta.

    The new meta is ``{**meta, "status": repair_to, "updatedAt": <now ISO>}``:
    every other key, unknown ones included, is kept (A4). The write carries
    ``lease``, so over a fenced store a successor that acquired meanwhile fences
    the repair out (``LeaseHeldError``). No model call, no workflow.

    Raises:
        LeaseHeldError: the lease is not live (fenced stores).
        StoreBusyError, StoreUnavailableError: the store did not answer.
    """
    audit = audit_run(store, run_id)
    if audit.verdict not in REPAIRABLE or audit.repair_to is None or audit.meta is None:
        return ReconcileResult(audit, False)
    clock = now if now is not None else system_clock_ms
    repaired = {**audit.meta, "status": audit.repair_to, "updatedAt": _iso_now(clock)}
    store.put_meta(repaired, lease)
    return ReconcileResult(audit, True)
