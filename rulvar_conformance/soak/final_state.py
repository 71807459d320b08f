"""The referee's diff of the store's final state against the serial history (S9).

For each run, the serial history (accepted mutations in ``(epoch, counter)``
order, unknown-outcome calls in their slots) allows a set of final states: an
accepted call moves every candidate, an unknown one keeps each candidate both
with and without its effect. The store must hold one of them: the journal (as
the sequence of nonces), the meta record's ``soak.nonce`` and each blob's nonce.
Independently, stored seqs must run 1, 2, 3, ..., epochs must not decrease along
the journal, nothing may reach ``soak-other``, and completed victims must vanish.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from rulvar_conformance.soak.config import OTHER_RUN
from rulvar_conformance.soak.events import Event
from rulvar_conformance.soak.snapshot import FinalState
from rulvar_conformance.soak.violations import Violation, violation

__all__ = [
    "MAX_STATES",
    "SerialOp",
    "check_blobs",
    "check_journal",
    "check_meta",
    "check_other_and_victims",
    "victims_of",
]

MAX_STATES: Final = 4096
"""Candidate final states kept per run; unknown calls are rare (one per kill)."""


@dataclass(frozen=True)
class SerialOp:
    surface: str
    epoch: int
    counter: int
    nonce: str
    certain: bool  # accepted; False = outcome unknown
    op_id: str
    ref: str | None = None
    seq: float | None = None


def _nonce_of(record: Any) -> Any:
    if isinstance(record, dict):
        value = record.get("value", record)
        soak = value.get("soak") if isinstance(value, dict) else None
        if isinstance(soak, dict):
            return soak.get("nonce")
    return None


def _blob_nonce(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return _nonce_of(json.loads(data))
    except ValueError:
        return data[:60].decode("utf-8", "replace")


def _grow(states: set[Any], op: SerialOp, apply: Any) -> set[Any]:
    after = {apply(state) for state in states}
    if op.certain:
        return after
    merged = states | after
    return merged if len(merged) <= MAX_STATES else after


def check_journal(
    state: FinalState,
    run_id: str,
    ops: list[SerialOp],
    out: list[Violation],
    unknown: list[dict[str, Any]],
) -> None:
    states: set[tuple[str, ...]] = {()}
    accepted_seq: dict[str, float | None] = {}
    for op in ops:
        if op.surface == "append":
            states = _grow(states, op, lambda s, n=op.nonce: (*s, n))
            if op.certain:
                accepted_seq[op.nonce] = op.seq
        elif op.surface == "delete":
            states = _grow(states, op, lambda s: ())
    entries = state.run(run_id).entries
    stored = tuple(str(_nonce_of(entry)) for entry in entries)
    for index, entry in enumerate(entries):
        if entry.get("seq") != index + 1:
            out.append(
                violation(
                    f"SEQ GAP: {run_id} entry {index} has seq {entry.get('seq')}, expected {index + 1}"
                )
            )
            break
    epochs = [e.get("value", {}).get("soak", {}).get("epoch", 0) for e in entries]
    if any(b < a for a, b in pairwise(epochs)):
        out.append(violation(f"EPOCH DECREASING: {run_id} journal epochs {epochs}"))
    for index, nonce in enumerate(stored):
        logged = accepted_seq.get(nonce)
        if logged is not None and logged != index + 1:
            out.append(
                violation(
                    f"LOGGED SEQ MISMATCH: {run_id} {nonce} logged seq {logged}, stored at {index + 1}"
                )
            )
    for op in ops:
        if op.surface == "append" and not op.certain:
            unknown.append(
                {
                    "id": op.op_id,
                    "op": "append",
                    "run": run_id,
                    "resolved": "committed" if op.nonce in stored else "not committed",
                }
            )
        elif op.surface == "delete" and not op.certain:
            unknown.append(
                {
                    "id": op.op_id,
                    "op": "delete",
                    "run": run_id,
                    "resolved": "consistent with the final journal",
                }
            )
    if stored in states:
        return
    expected = min(states, key=lambda s: (len(set(s) ^ set(stored)), len(s)))
    lost = [n for n in expected if n not in stored]
    extra = [n for n in stored if n not in expected]
    if lost:
        out.append(
            violation(
                f"LOST WRITE: {run_id} accepted append(s) {lost[:5]} missing from the journal"
            )
        )
    if extra:
        out.append(
            violation(
                f"UNEXPECTED ENTRY: {run_id} journal holds {extra[:5]} no accepted append explains"
            )
        )
    if not lost and not extra:
        out.append(
            violation(
                f"ORDER MISMATCH: {run_id} journal {list(stored)[:8]} vs serial history {list(expected)[:8]}"
            )
        )
    if len(stored) != len(expected):
        out.append(
            violation(
                f"JOURNAL LENGTH: {run_id} holds {len(stored)} entries, the history accepts {len(expected)}"
            )
        )


def check_meta(
    state: FinalState,
    run_id: str,
    ops: list[SerialOp],
    out: list[Violation],
    unknown: list[dict[str, Any]],
) -> None:
    states: set[Any] = {None}
    for op in ops:
        if op.surface == "meta":
            states = _grow(states, op, lambda s, n=op.nonce: n)
        elif op.surface == "delete":
            states = _grow(states, op, lambda s: None)
    stored = _nonce_of(state.run(run_id).meta)
    for op in ops:
        if op.surface == "meta" and not op.certain:
            unknown.append(
                {
                    "id": op.op_id,
                    "op": "meta",
                    "run": run_id,
                    "resolved": "committed"
                    if stored == op.nonce
                    else "not visible (not committed or overwritten)",
                }
            )
    if stored not in states:
        out.append(
            violation(
                f"META MISMATCH: {run_id} meta soak.nonce {stored!r}, the history allows {sorted(map(str, states))[:4]}"
            )
        )


def check_blobs(
    state: FinalState,
    run_id: str,
    ops: list[SerialOp],
    out: list[Violation],
    unknown: list[dict[str, Any]],
) -> None:
    per_ref: dict[str, set[Any]] = defaultdict(lambda: {None})
    for op in ops:
        if op.ref is None or op.surface not in ("blob-put", "blob-delete"):
            continue
        new = op.nonce if op.surface == "blob-put" else None
        per_ref[op.ref] = _grow(per_ref[op.ref], op, lambda s, n=new: n)
    held = state.run(run_id).blobs
    for ref in held:
        if ref not in per_ref:
            out.append(
                violation(
                    f"UNEXPECTED BLOB: {ref} ({_blob_nonce(held[ref])!r}) no accepted put explains"
                )
            )
    for ref, states in sorted(per_ref.items()):
        stored = _blob_nonce(held.get(ref))
        if stored not in states:
            out.append(
                violation(
                    f"BLOB MISMATCH: {ref} holds {stored!r}, the history allows {sorted(map(str, states))[:4]}"
                )
            )
    for op in ops:
        if op.ref is not None and not op.certain:
            present = _blob_nonce(held.get(op.ref))
            unknown.append(
                {
                    "id": op.op_id,
                    "op": op.surface,
                    "run": run_id,
                    "resolved": "committed"
                    if (
                        present == op.nonce
                        if op.surface == "blob-put"
                        else present is None
                    )
                    else "not visible",
                }
            )


def victims_of(history: Iterable[Event]) -> list[str]:
    """The side runs whose victim cycle completed: they must have vanished."""
    return [str(event["vid"]) for event in history if event.get("t") == "victim"]


def check_other_and_victims(
    state: FinalState, history: list[Event], out: list[Violation]
) -> None:
    other = list(state.run(OTHER_RUN).blobs)
    if other:
        out.append(violation(f"CROSS-RUN WRITE: {OTHER_RUN} holds blobs {other[:4]}"))
    for vid in victims_of(history):
        victim = state.run(vid)
        left = []
        if victim.entries:
            left.append("entries")
        if victim.meta is not None:
            left.append("meta")
        if victim.blobs:
            left.append("blobs")
        if left:
            out.append(
                violation(
                    f"VICTIM LEFTOVERS: completed victim {vid} still has {', '.join(left)}"
                )
            )
