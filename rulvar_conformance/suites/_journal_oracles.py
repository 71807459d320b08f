"""The two journal checks that read a journal through the C5 fold (CONTRACT 8.2).

TS drove these through its kernel; the port keeps each check's property over
threads and the kit's own fold (CONTRACT 14.8).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Final, cast

from rulvar_conformance.fold import Seq, fold_journal, fold_state_sha256
from rulvar_conformance.harness.kit import (
    Fresh,
    error_code,
    require,
    run_concurrently,
)
from rulvar_store import JournalEntry, JournalStore

__all__ = ["ResolutionArbiter", "abandon_derived_skip", "decide_once_oracle"]

RUN: Final = "conformance-run"
_MAX_APPEND_ROUNDS: Final = 50
_TERMINAL: Final = ("ok", "error", "limit", "cancelled", "escalated")
_TWO_PHASE: Final = ("agent", "step", "child")


def _entry(
    seq: int, kind: str, status: str, scope: str = "", **rest: Any
) -> JournalEntry:
    entry: JournalEntry = {"hashVersion": 2, "seq": seq}
    if "ref" in rest:
        entry["ref"] = rest.pop("ref")
    entry.update(scope=scope, key=f"oracle-{seq}", ordinal=0, kind=kind, status=status)
    entry.update(rest)
    entry.update(spanId="oracle-span", startedAt=f"2026-01-01T00:01:{seq:02d}.000Z")
    return entry


class ResolutionArbiter:
    """Serializes resolutions per target, as a host kernel would.

    ``resolve`` appends a ``resolution`` entry at the tail and then classifies it
    with the C5 fold: the journal, not the arbiter, decides which one applied.
    """

    def __init__(self, store: JournalStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._guard = threading.Lock()
        self._locks: dict[Seq, threading.Lock] = {}

    def _lock(self, target: Seq) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(target, threading.Lock())

    def resolve(self, target: Seq, by: str, value: Any) -> tuple[Seq, str]:
        """Journal one resolution of ``target``; return its seq and classification."""
        with self._lock(target):
            for _ in range(_MAX_APPEND_ROUNDS):
                entries = self._store.load(self._run_id)
                seq = max((e["seq"] for e in entries), default=-1) + 1
                body = {"target": target, "by": by, "value": value}
                entry = _entry(seq, "resolution", "ok", ref=target, resolution=body)
                try:
                    self._store.append(self._run_id, entry)
                    break
                except Exception as exc:
                    if error_code(exc) != "journal_order_violation":
                        raise
            else:
                require(False, f"resolution by {by!r} never found a free seq")
            verdict = fold_journal(self._store.load(self._run_id)).classifications[seq]
            return seq, verdict.verdict


def decide_once_oracle(stores: Fresh[JournalStore]) -> None:
    """Two concurrent resolutions of one suspension: exactly one is applied."""
    with stores() as store:
        store.append(
            RUN, _entry(0, "external", "suspended", value={"key": "decide-once"})
        )
        arbiter = ResolutionArbiter(store, RUN)
        attempts: list[Callable[[], tuple[Seq, str]]] = [
            partial(arbiter.resolve, 0, by, {"decidedBy": by})
            for by in ("external", "timeout")
        ]
        outcomes = run_concurrently(attempts)
        results: list[tuple[Seq, str]] = []
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
            results.append(cast(tuple[Seq, str], outcome.value))
        applied = [seq for seq, verdict in results if verdict == "applied"]
        require(
            len(applied) == 1, f"{len(applied)} of 2 resolutions applied: {results}"
        )
        loaded = store.load(RUN)
        journaled = {entry.get("seq") for entry in loaded}
        require(
            all(seq in journaled for seq, _ in results),
            f"not both resolutions were journaled: seqs {sorted(map(str, journaled))}",
        )
        state = fold_journal(loaded).suspension_state(0)
        require(
            state.get("state") == "resolved" and state.get("by") == applied[0],
            f"the journal folds to {state}, not 'resolved by {applied[0]}'",
        )
        first, second = (
            fold_state_sha256(store.load(RUN)),
            fold_state_sha256(store.load(RUN)),
        )
        require(first == second, "two loads of the same journal fold differently")


def _usage_total(entry: JournalEntry) -> float:
    usage = entry.get("usage")
    if not isinstance(usage, dict):
        return 0.0
    return float(sum(v for v in usage.values() if isinstance(v, int | float)))


def abandon_derived_skip(stores: Fresh[JournalStore]) -> None:
    """An abandon covers its target's subtree: no usage counted, no orphan left."""
    usage = {"inputTokens": 120, "outputTokens": 30, "costUsd": 0.25}
    journal = [
        _entry(0, "agent", "running"),
        _entry(1, "agent", "running", scope="agent:0"),
        _entry(2, "agent", "ok", scope="agent:0", ref=1, value="done", usage=usage),
        _entry(3, "abandon", "ok", ref=0,
               abandon={"target": 0, "authorizedBy": 0, "reason": "conformance"}),
    ]  # fmt: skip
    with stores() as store:
        for entry in journal:
            store.append(RUN, entry)
        loaded = store.load(RUN)
    fold = fold_journal(loaded)
    verdict = fold.classifications.get(3)
    applied = verdict is not None and verdict.verdict == "applied"
    require(applied, f"the abandon was classified {verdict}")
    require(fold.covered.get(0) is True, "seq 0 is not abandoned after its abandon")
    terminals = [e for e in loaded if e.get("status") in _TERMINAL and "ref" in e]
    spent = sum(_usage_total(e) for e in terminals if not fold.covered.get(e["seq"]))
    require(spent == 0, f"usage over uncovered terminals is {spent}, not 0")
    closed = {e["ref"] for e in terminals}

    def dangling(entry: JournalEntry) -> bool:
        seq = entry["seq"]
        return (
            entry.get("status") == "running"
            and entry.get("kind") in _TWO_PHASE
            and seq not in closed
            and not fold.covered.get(seq, False)
        )

    orphans = [entry.get("seq") for entry in loaded if dangling(entry)]
    require(not orphans, f"dangling uncovered running entries: {orphans}")
