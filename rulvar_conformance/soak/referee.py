"""The soak referee (S9): rebuild the serial history the epochs promise, diff the store.

``verify_soak_history`` is pure: it reads the writers' records and the store's
final state and returns violations as text. The serial history of a run is its
accepted mutations sorted by ``(epoch, counter)``: epochs totally order the
tenures and one holder issues its calls in program order. A call whose outcome is
unknown (its writer was SIGKILLed between the ``invoke`` and the completion) takes
its slot in that order as "may or may not have happened": the referee keeps every
final state the history allows and checks that the store holds one of them, so an
unknown call is never counted as lost, yet a state no history explains is caught.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rulvar_conformance.soak.config import DEFAULT_SOAK_RUNS, OTHER_RUN
from rulvar_conformance.soak.events import Event, unfinished_ids

__all__ = ["RefereeVerdict", "referee_history", "verify_soak_history"]

MUTATIONS: Final = frozenset({"marker", "append", "meta", "blob-put", "blob-delete", "delete"})
_OP_SURFACE: Final = {"append": "append", "meta": "meta", "blob-put": "blob-put",
                      "blob-delete": "blob-delete", "delete": "delete"}
MAX_STATES: Final = 4096


@dataclass
class RefereeVerdict:
    """Violations plus how each unknown-outcome call was resolved."""

    violations: list[str] = field(default_factory=list)
    unknown: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _Op:
    surface: str
    epoch: int
    counter: int
    nonce: str
    certain: bool  # accepted; False = outcome unknown
    op_id: str
    ref: str | None = None
    seq: float | None = None


def _who(event: Event) -> str:
    return f"w{event.get('w')}.{event.get('inc')}"


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


def verify_soak_history(
    journal: Any, blobs: Any, events: Iterable[Event], runs: Sequence[str] = DEFAULT_SOAK_RUNS
) -> list[str]:
    """Every S9 check over ``events`` and the store's final state; [] when clean."""
    return referee_history(journal, blobs, events, runs).violations


def referee_history(
    journal: Any, blobs: Any, events: Iterable[Event], runs: Sequence[str] = DEFAULT_SOAK_RUNS
) -> RefereeVerdict:
    """As ``verify_soak_history``, also reporting how unknown outcomes resolved."""
    history = sorted(events, key=lambda e: (e.get("ns", 0)))
    verdict = RefereeVerdict()
    out = verdict.violations
    for event in history:
        kind = event.get("t")
        if kind == "stale-accept":
            out.append(
                f"STALE ACCEPT: {_who(event)} {event.get('surface')} on {event.get('run')} "
                f"under dead epoch {event.get('epoch')} ({event.get('id')})"
            )
        elif kind == "error":
            out.append(f"ERROR: {_who(event)}: {event.get('detail')}")
        elif kind == "fatal":
            out.append(f"FATAL: {_who(event)}: {event.get('detail')}")
    grants = _check_grants(history, out)
    invokes = {e["id"]: e for e in history if e.get("t") == "invoke"}
    _check_accepts(history, grants, invokes, out)
    unknown = unfinished_ids(history)
    for run_id in runs:
        ops = _serial_ops(history, invokes, unknown, run_id, out)
        _check_journal(journal, run_id, ops, out, verdict.unknown)
        _check_meta(journal, run_id, ops, out, verdict.unknown)
        _check_blobs(blobs, run_id, ops, out, verdict.unknown)
    _check_other_and_victims(journal, blobs, history, out)
    for op_id, call in unknown.items():
        if call.get("op") not in _OP_SURFACE or call.get("stale"):
            verdict.unknown.append({"id": op_id, "op": call.get("op"), "run": call.get("run"),
                                    "resolved": "no durable trace to resolve (checked by the fence checks)"})
    return verdict


def _check_grants(history: list[Event], out: list[str]) -> dict[tuple[str, int], tuple[str, int]]:
    """Epoch granted twice; a holder's grants of one run not strictly increasing."""
    grants: dict[tuple[str, int], tuple[str, int]] = {}
    last: dict[tuple[str, str], int] = {}
    for event in history:
        if event.get("t") != "grant":
            continue
        run_id, epoch, who = event["run"], int(event["epoch"]), _who(event)
        if (run_id, epoch) in grants:
            out.append(
                f"DOUBLE GRANT: {run_id} epoch {epoch} granted to {grants[run_id, epoch][0]} and {who}"
            )
        else:
            grants[run_id, epoch] = (who, int(event.get("ns", 0)))
        previous = last.get((who, run_id))
        if previous is not None and epoch <= previous:
            out.append(
                f"GRANTS NOT INCREASING: {who} got {run_id} epoch {epoch} after epoch {previous}"
            )
        last[who, run_id] = epoch
    return grants


def _check_accepts(
    history: list[Event],
    grants: dict[tuple[str, int], tuple[str, int]],
    invokes: dict[str, Event],
    out: list[str],
) -> None:
    """An accept must ride its own writer's grant and start before any higher grant."""
    by_run: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (run_id, epoch), (_, ns) in grants.items():
        by_run[run_id].append((ns, epoch))
    highest: dict[str, tuple[list[int], list[int]]] = {}
    for run_id, rows in by_run.items():
        rows.sort()
        times, best, top = [], [], 0
        for ns, epoch in rows:
            top = max(top, epoch)
            times.append(ns)
            best.append(top)
        highest[run_id] = (times, best)
    for event in history:
        if event.get("t") != "accept":
            continue
        run_id, epoch, who = event["run"], int(event["epoch"]), _who(event)
        granted = grants.get((run_id, epoch))
        if granted is None:
            out.append(f"ACCEPT WITHOUT GRANT: {who} {event.get('surface')} on {run_id} epoch {epoch}")
        elif granted[0] != who:
            out.append(
                f"ACCEPT UNDER ANOTHER WRITER'S EPOCH: {who} {event.get('surface')} on {run_id} "
                f"under epoch {epoch}, granted to {granted[0]}"
            )
        call = invokes.get(event.get("id", ""))
        if call is None or run_id not in highest:
            continue
        times, best = highest[run_id]
        index = bisect.bisect_left(times, int(call.get("ns", 0))) - 1
        if index >= 0 and best[index] > epoch:
            out.append(
                f"STALE ACCEPT: {who} {event.get('surface')} on {run_id} under epoch {epoch} "
                f"was invoked after epoch {best[index]} had been granted"
            )


def _serial_ops(
    history: list[Event],
    invokes: dict[str, Event],
    unknown: dict[str, Event],
    run_id: str,
    out: list[str],
) -> list[_Op]:
    """Accepted and unknown-outcome mutations of ``run_id`` in (epoch, counter) order."""
    ops: list[_Op] = []
    for event in history:
        if event.get("t") == "accept" and event.get("run") == run_id and event.get("surface") in MUTATIONS:
            surface = "append" if event["surface"] == "marker" else event["surface"]
            ops.append(_Op(surface, int(event["epoch"]), int(event["counter"]), str(event["nonce"]),
                           True, str(event.get("id")), event.get("ref"), event.get("seq")))
    for op_id, call in unknown.items():
        if call.get("run") == run_id and call.get("op") in _OP_SURFACE and not call.get("stale"):
            ops.append(_Op(_OP_SURFACE[call["op"]], int(call["epoch"]), int(call["counter"]),
                           str(call.get("nonce")), False, op_id, call.get("ref"), call.get("seq")))
    ops.sort(key=lambda op: (op.epoch, op.counter, not op.certain))
    for before, after in zip(ops, ops[1:], strict=False):
        if (before.epoch, before.counter) == (after.epoch, after.counter):
            out.append(f"DUPLICATE POSITION: {run_id} epoch {before.epoch} counter {before.counter} "
                       f"({before.op_id}, {after.op_id})")
    return ops


def _grow(states: set[Any], op: _Op, apply: Any) -> set[Any]:
    after = {apply(state) for state in states}
    if op.certain:
        return after
    merged = states | after
    return merged if len(merged) <= MAX_STATES else after


def _check_journal(journal: Any, run_id: str, ops: list[_Op], out: list[str], unknown: list[dict[str, Any]]) -> None:
    states: set[tuple[str, ...]] = {()}
    accepted_seq: dict[str, float | None] = {}
    for op in ops:
        if op.surface == "append":
            states = _grow(states, op, lambda s, n=op.nonce: (*s, n))
            if op.certain:
                accepted_seq[op.nonce] = op.seq
        elif op.surface == "delete":
            states = _grow(states, op, lambda s: ())
    entries = journal.load(run_id)
    stored = tuple(str(_nonce_of(entry)) for entry in entries)
    for index, entry in enumerate(entries):
        if entry.get("seq") != index + 1:
            out.append(f"SEQ GAP: {run_id} entry {index} has seq {entry.get('seq')}, expected {index + 1}")
            break
    epochs = [e.get("value", {}).get("soak", {}).get("epoch", 0) for e in entries]
    if any(b < a for a, b in zip(epochs, epochs[1:], strict=False)):
        out.append(f"EPOCH DECREASING: {run_id} journal epochs {epochs}")
    for index, nonce in enumerate(stored):
        logged = accepted_seq.get(nonce)
        if logged is not None and logged != index + 1:
            out.append(f"LOGGED SEQ MISMATCH: {run_id} {nonce} logged seq {logged}, stored at {index + 1}")
    for op in ops:
        if op.surface == "append" and not op.certain:
            unknown.append({"id": op.op_id, "op": "append", "run": run_id,
                            "resolved": "committed" if op.nonce in stored else "not committed"})
        elif op.surface == "delete" and not op.certain:
            unknown.append({"id": op.op_id, "op": "delete", "run": run_id,
                            "resolved": "consistent with the final journal"})
    if stored in states:
        return
    expected = min(states, key=lambda s: (len(set(s) ^ set(stored)), len(s)))
    lost = [n for n in expected if n not in stored]
    extra = [n for n in stored if n not in expected]
    if lost:
        out.append(f"LOST WRITE: {run_id} accepted append(s) {lost[:5]} missing from the journal")
    if extra:
        out.append(f"UNEXPECTED ENTRY: {run_id} journal holds {extra[:5]} no accepted append explains")
    if not lost and not extra:
        out.append(f"ORDER MISMATCH: {run_id} journal {list(stored)[:8]} vs serial history {list(expected)[:8]}")
    if len(stored) != len(expected):
        out.append(f"JOURNAL LENGTH: {run_id} holds {len(stored)} entries, the history accepts {len(expected)}")


def _check_meta(journal: Any, run_id: str, ops: list[_Op], out: list[str], unknown: list[dict[str, Any]]) -> None:
    states: set[Any] = {None}
    for op in ops:
        if op.surface == "meta":
            states = _grow(states, op, lambda s, n=op.nonce: n)
        elif op.surface == "delete":
            states = _grow(states, op, lambda s: None)
    stored = _nonce_of(journal.get_meta(run_id))
    for op in ops:
        if op.surface == "meta" and not op.certain:
            unknown.append({"id": op.op_id, "op": "meta", "run": run_id,
                            "resolved": "committed" if stored == op.nonce else "not visible (not committed or overwritten)"})
    if stored not in states:
        out.append(f"META MISMATCH: {run_id} meta soak.nonce {stored!r}, the history allows {sorted(map(str, states))[:4]}")


def _check_blobs(blobs: Any, run_id: str, ops: list[_Op], out: list[str], unknown: list[dict[str, Any]]) -> None:
    per_ref: dict[str, set[Any]] = defaultdict(lambda: {None})
    for op in ops:
        if op.ref is None or op.surface not in ("blob-put", "blob-delete"):
            continue
        new = op.nonce if op.surface == "blob-put" else None
        per_ref[op.ref] = _grow(per_ref[op.ref], op, lambda s, n=new: n)
    listed = sorted(blobs.list_refs(run_id))
    for ref in listed:
        if ref not in per_ref:
            out.append(f"UNEXPECTED BLOB: {ref} ({_blob_nonce(blobs.get(ref))!r}) no accepted put explains")
    for ref, states in sorted(per_ref.items()):
        stored = _blob_nonce(blobs.get(ref)) if ref in listed else None
        if stored not in states:
            out.append(f"BLOB MISMATCH: {ref} holds {stored!r}, the history allows {sorted(map(str, states))[:4]}")
    for op in ops:
        if op.ref is not None and not op.certain:
            present = _blob_nonce(blobs.get(op.ref)) if op.ref in listed else None
            unknown.append({"id": op.op_id, "op": op.surface, "run": run_id,
                            "resolved": "committed" if (present == op.nonce if op.surface == "blob-put" else present is None) else "not visible"})


def _check_other_and_victims(journal: Any, blobs: Any, history: list[Event], out: list[str]) -> None:
    if blobs.list_refs(OTHER_RUN):
        out.append(f"CROSS-RUN WRITE: {OTHER_RUN} holds blobs {blobs.list_refs(OTHER_RUN)[:4]}")
    for event in history:
        if event.get("t") != "victim":
            continue
        vid = event["vid"]
        left = []
        if journal.load(vid):
            left.append("entries")
        if journal.get_meta(vid) is not None:
            left.append("meta")
        if blobs.list_refs(vid):
            left.append("blobs")
        if left:
            out.append(f"VICTIM LEFTOVERS: completed victim {vid} still has {', '.join(left)}")
