"""Retention (CONTRACT 12): delete a run, prune its spent checkpoints, sweep runs.

``delete_run`` removes the blobs first, then the journal, meta and lease row, so
a crash in between leaves a listed run with fewer blobs (a sweep finishes it),
never blobs no run owns. ``prune_run`` deletes only checkpoints nothing refers
to any more, by exact string. ``sweep_runs`` does either under a brief lease of
its own: a live run is skipped, and over a fenced pair a sweep whose lease was
taken over mid-way is refused by the store instead of deleting a live run.
None of these drops the epoch counter (L5, R4): ``journal.delete`` keeps it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from rulvar_store._protocols import JournalStore, LeasableStore, TranscriptStore
from rulvar_store._records import JournalEntry, Lease
from rulvar_store._refs import ref_run_id
from rulvar_store.errors import LeaseHeldError, RulvarError

__all__ = [
    "SweepOutcome",
    "delete_run",
    "is_leasable",
    "prune_candidates",
    "prune_run",
    "sweep_owner",
    "sweep_runs",
    "with_brief_lease",
]

SWEEP_OWNER_PREFIX: Final = "runs-retention"


def delete_run(
    journal: JournalStore,
    transcripts: TranscriptStore,
    run_id: str,
    *,
    lease: Lease | None = None,
) -> None:
    """Delete every blob ``list_refs(run_id)`` lists, then the journal (R1).

    Each delete carries ``lease``; over a fenced pair a stale lease makes the
    first refused call raise and nothing after it runs. The epoch counter stays.

    Raises:
        LeaseHeldError: the lease is not live (fenced stores).
    """
    for ref in transcripts.list_refs(run_id):
        transcripts.delete(ref, lease)
    journal.delete(run_id, lease)


def _strings(value: Any, counts: Counter[str]) -> None:
    """Count every string value and object key at any depth."""
    if isinstance(value, str):
        counts[value] += 1
    elif isinstance(value, dict):
        for key, item in value.items():
            counts[key] += 1
            _strings(item, counts)
    elif isinstance(value, list):
        for item in value:
            _strings(item, counts)


def _is_candidate(entry: JournalEntry) -> bool:
    ref = entry.get("ref")
    return (
        entry.get("kind") == "agent"
        and entry.get("status") == "ok"
        and isinstance(ref, int | float)
        and not isinstance(ref, bool)
        and isinstance(entry.get("checkpointRef"), str)
    )


def prune_candidates(
    entries: Sequence[JournalEntry], stored: Iterable[str]
) -> list[str]:
    """Return the checkpoint refs R2 allows to delete, in journal order.

    Candidates are the ``checkpointRef`` of ``ok`` agent terminals (with a
    ``ref``) whose blob is among ``stored``. One is kept when its exact string
    occurs anywhere else: any string value or object key at any depth of any
    entry, another entry's ``checkpointRef`` included; its owner's own field is
    the one occurrence that does not count. Substrings never count.
    """
    present = set(stored)
    counts: Counter[str] = Counter()
    for entry in entries:
        _strings(entry, counts)
    chosen: list[str] = []
    for entry in entries:
        if not _is_candidate(entry):
            continue
        ref = str(entry["checkpointRef"])
        if ref in present and counts[ref] == 1 and ref not in chosen:
            chosen.append(ref)
    return chosen


def prune_run(
    journal: JournalStore,
    transcripts: TranscriptStore,
    run_id: str,
    *,
    lease: Lease | None = None,
) -> int:
    """Delete the run's unreferenced ``ok`` agent checkpoints; return how many (R2).

    Parked, cancelled, escalated and dangling attempts keep theirs, and a
    checkpoint of another run is never touched.

    Raises:
        LeaseHeldError: the lease is not live (fenced stores).
    """
    stored = [ref for ref in transcripts.list_refs(run_id) if ref_run_id(ref) == run_id]
    doomed = prune_candidates(journal.load(run_id), stored)
    for ref in doomed:
        transcripts.delete(ref, lease)
    return len(doomed)


def is_leasable(store: object) -> bool:
    """Whether ``store`` takes leases (``acquire``/``release``); the file store does not."""
    return callable(getattr(store, "acquire", None)) and callable(
        getattr(store, "release", None)
    )


def sweep_owner(purpose: str = SWEEP_OWNER_PREFIX) -> str:
    """The lease owner of a sweep in this process: ``<purpose>-<pid>``."""
    return f"{purpose}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What a sweep did with one run; ``detail`` is the reason for a skip or refusal.

    ``done`` is the action's result (blobs pruned; for a delete, ``None``).
    """

    run_id: str
    outcome: Literal["done", "skipped", "refused"]
    detail: str = ""
    done: int | None = None


def with_brief_lease(
    journal: JournalStore,
    run_id: str,
    owner: str,
    action: Callable[[Lease | None], int | None],
) -> SweepOutcome:
    """Run ``action`` under a lease of its own, released quietly afterwards (R3).

    A live lease of someone else: ``skipped``, nothing waited for. A store
    without leases runs the action unleased (single-writer use). An action the
    store refuses with ``LeaseHeldError`` (the lease was lost mid-way): ``refused``.
    """
    lease: Lease | None = None
    if is_leasable(journal):
        leasable = cast(LeasableStore, journal)  # is_leasable checked it
        try:
            lease = leasable.acquire(run_id, owner)
        except LeaseHeldError as exc:
            return SweepOutcome(run_id, "skipped", f"leased by a live owner ({exc})")
    try:
        result = action(lease)
    except LeaseHeldError as exc:
        return SweepOutcome(run_id, "refused", f"lost its lease mid-way ({exc})")
    finally:
        if lease is not None:
            with suppress(
                RulvarError
            ):  # an expired or taken-over lease: nothing to free
                leasable.release(lease)
    return SweepOutcome(run_id, "done", done=result)


def sweep_runs(
    journal: JournalStore,
    transcripts: TranscriptStore,
    run_ids: Iterable[str],
    *,
    prune: bool = False,
    owner: str | None = None,
) -> Iterator[SweepOutcome]:
    """Delete (or with ``prune`` only prune) each run under a brief lease (R3, R4).

    Yields one outcome per run as it goes; a live run is skipped, never raced.
    """
    who = owner if owner is not None else sweep_owner()
    for run_id in run_ids:

        def act(lease: Lease | None, run_id: str = run_id) -> int | None:
            if prune:
                return prune_run(journal, transcripts, run_id, lease=lease)
            delete_run(journal, transcripts, run_id, lease=lease)
            return None

        yield with_brief_lease(journal, run_id, who, act)
