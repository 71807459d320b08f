"""Shared helpers of the edge suites: expected-vs-observed refusals and run snapshots.

Every detail these helpers produce reads "expected X, observed Y", so a failing
row tells a store author what the contract wanted and what the store did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from rulvar_conformance.harness.kit import Outcome, attempt, require
from rulvar_store import (
    ContractError,
    JournalOrderViolation,
    LeasableStore,
    Lease,
    LeaseHeldError,
    OpenedStore,
    has_fenced_writes,
    read_run_meta,
)
from rulvar_store.backend import stable_stringify

__all__ = [
    "RunSnapshot",
    "describe",
    "difference",
    "expect_lease_held",
    "expect_ok",
    "fenced_blobs",
    "fenced_journal",
    "future_lease",
    "is_leasable",
    "shown",
    "snapshot",
    "typed_refusal",
]

_SHOWN_CHARS: Final = 160


def shown(value: Any) -> str:
    """A short repr for reports: long values are cut with their total length."""
    text = repr(value)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS]}... ({len(text)} chars)"


def difference(expected: Any, observed: Any) -> str:
    """Say where ``observed`` first departs from ``expected`` (canonical JSON, C3)."""
    if isinstance(expected, list) and isinstance(observed, list):
        for index, (want, got) in enumerate(zip(expected, observed, strict=False)):
            if stable_stringify(want) != stable_stringify(got):
                return (
                    f"item {index}: expected {shown(want)}, observed {shown(got)} "
                    f"({difference(want, got)})"
                )
        return f"expected {len(expected)} items, observed {len(observed)}"
    if isinstance(expected, dict) and isinstance(observed, dict):
        missing = sorted(set(expected) - set(observed), key=str)
        extra = sorted(set(observed) - set(expected), key=str)
        changed = [
            key
            for key in expected
            if key in observed
            and stable_stringify(expected[key]) != stable_stringify(observed[key])
        ]
        parts = [f"missing keys {missing}"] if missing else []
        parts += [f"extra keys {extra}"] if extra else []
        parts += [
            f"{key!r}: expected {shown(expected[key])}, observed {shown(observed[key])}"
            for key in changed[:3]
        ]
        return "; ".join(parts) or "same keys and values, different key order"
    return f"expected {shown(expected)}, observed {shown(observed)}"


def describe(error: BaseException | None) -> str:
    """Name an outcome's error for a report (``success`` when there was none)."""
    if error is None:
        return "success"
    return f"{type(error).__name__}: {shown(str(error))}"


def expect_lease_held(outcome: Outcome[Any], what: str) -> None:
    """Require that ``outcome`` is a ``LeaseHeldError`` (L6, F2)."""
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"{what}: expected LeaseHeldError, observed {describe(outcome.error)}"
        + (
            " (the seq guard answered before the fence, J7)"
            if isinstance(outcome.error, JournalOrderViolation)
            else ""
        ),
    )


def expect_ok(call: Callable[[], Any], what: str) -> Any:
    """Run ``call``; require that it succeeds and return its value."""
    outcome = attempt(call)
    require(outcome.ok, f"{what}: expected success, observed {describe(outcome.error)}")
    return outcome.value


def is_leasable(opened: OpenedStore) -> bool:
    """Whether the journal of ``opened`` has acquire, renew and release."""
    return isinstance(opened.journal, LeasableStore)


class RunSnapshot:
    """What any handle can observe of one run: journal, meta, listing, blobs (F3).

    Compared canonically (C3), so "nothing changed" means byte-for-byte JSON
    equality of entries and meta and exact bytes of every blob of the run.
    """

    def __init__(self, opened: OpenedStore, run_id: str, blob_refs: tuple[str, ...]):
        journal = opened.journal
        self.run_id = run_id
        self.journal = stable_stringify(journal.load(run_id))
        meta = read_run_meta(journal, run_id)
        self.meta = None if meta is None else stable_stringify(meta)
        self.listed = any(m.get("runId") == run_id for m in journal.list_runs())
        transcripts = opened.transcripts
        self.refs = list(transcripts.list_refs(run_id))
        self.blobs = {ref: transcripts.get(ref) for ref in blob_refs}

    def parts(self) -> dict[str, Any]:
        return {
            "journal": self.journal,
            "meta": self.meta,
            "listed by list_runs": self.listed,
            "blob refs": self.refs,
            "blobs": self.blobs,
        }

    def require_same(self, after: RunSnapshot, what: str) -> None:
        """Require that ``after`` shows exactly what this snapshot showed."""
        before_parts, after_parts = self.parts(), after.parts()
        for name, expected in before_parts.items():
            observed = after_parts[name]
            require(
                observed == expected,
                f"{what} changed the {name} of run {self.run_id!r} (F3): "
                f"expected {shown(expected)}, observed {shown(observed)}",
            )


def snapshot(
    opened: OpenedStore, run_id: str, blob_refs: tuple[str, ...] = ()
) -> RunSnapshot:
    """Observe ``run_id`` through ``opened``, reading the blobs named by ``blob_refs``."""
    return RunSnapshot(opened, run_id, blob_refs)


def fenced_journal(opened: OpenedStore) -> bool:
    """Whether the journal declares fenced meta writes and deletes (F1)."""
    return has_fenced_writes(opened.journal)


def fenced_blobs(opened: OpenedStore) -> bool:
    """Whether the transcript store declares fenced blob writes (T6)."""
    return has_fenced_writes(opened.transcripts)


def typed_refusal(error: BaseException | None) -> bool:
    """A refusal of bad data as D2 allows: ``TypeError``, ``ValueError`` or ``ContractError``."""
    return isinstance(error, TypeError | ValueError | ContractError)


def future_lease(lease: Lease, *, owner: str | None = None, bump: int = 1) -> Lease:
    """A lease nobody was issued: ``lease`` with its epoch raised or owner swapped."""
    return Lease(
        lease.run_id, lease.owner if owner is None else owner, lease.epoch + bump
    )
