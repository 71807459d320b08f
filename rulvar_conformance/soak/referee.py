"""The soak referee (S9): rebuild the serial history the epochs promise, diff the store.

``judge_soak`` is pure: it reads the writers' records and a snapshot of the
store's final state (``soak.snapshot``, read once after the storm) and returns
typed violations; ``verify_soak_history`` reads the snapshot and returns text. The serial history of a run is its
accepted mutations sorted by ``(epoch, counter)``: epochs totally order the
tenures and one holder issues its calls in program order. A call whose outcome is
unknown (its writer was SIGKILLed between the ``invoke`` and the completion) takes
its slot in that order as "may or may not have happened": the referee keeps every
final state the history allows and checks that the store holds one of them, so an
unknown call is never counted as lost, yet a state no history explains is caught.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Final

from rulvar_conformance.soak.config import DEFAULT_SOAK_RUNS, OTHER_RUN
from rulvar_conformance.soak.events import Event, unfinished_ids
from rulvar_conformance.soak.final_state import (
    SerialOp,
    check_blobs,
    check_journal,
    check_meta,
    check_other_and_victims,
    victims_of,
)
from rulvar_conformance.soak.snapshot import FinalState, read_final_state
from rulvar_conformance.soak.violations import (
    SURFACE_WORDS,
    Violation,
    violation,
)
from rulvar_store import MetaLookupStore, TranscriptStore

__all__ = [
    "RefereeVerdict",
    "judge_soak",
    "referee_history",
    "soak_run_ids",
    "verify_soak_history",
]

MUTATIONS: Final = frozenset(
    {"marker", "append", "meta", "blob-put", "blob-delete", "delete"}
)
SERIAL_CALLS: Final = frozenset({"append", "meta", "blob-put", "blob-delete", "delete"})
"""Calls whose unknown outcome takes a slot in a run's serial history (op name = surface)."""


@dataclass
class RefereeVerdict:
    """Violations plus how each unknown-outcome call was resolved."""

    violations: list[Violation] = field(default_factory=list)
    unknown: list[dict[str, Any]] = field(default_factory=list)


def _who(event: Event) -> str:
    return f"w{event.get('w')}.{event.get('inc')}"


def verify_soak_history(
    journal: MetaLookupStore,
    blobs: TranscriptStore,
    events: Iterable[Event],
    runs: Sequence[str] = DEFAULT_SOAK_RUNS,
) -> list[str]:
    """Every S9 check over ``events`` and the store's final state; [] when clean."""
    return [
        item.line for item in referee_history(journal, blobs, events, runs).violations
    ]


def soak_run_ids(events: Iterable[Event], runs: Sequence[str]) -> list[str]:
    """Every run the referee reads: the soak runs, the run nobody leases, the victims."""
    return [*runs, OTHER_RUN, *victims_of(events)]


def referee_history(
    journal: MetaLookupStore,
    blobs: TranscriptStore,
    events: Iterable[Event],
    runs: Sequence[str] = DEFAULT_SOAK_RUNS,
) -> RefereeVerdict:
    """As ``verify_soak_history``, also reporting how unknown outcomes resolved."""
    history = list(events)
    state = read_final_state(journal, blobs, soak_run_ids(history, runs))
    return judge_soak(state, history, runs)


def judge_soak(
    state: FinalState, events: Iterable[Event], runs: Sequence[str] = DEFAULT_SOAK_RUNS
) -> RefereeVerdict:
    """The pure verdict: the writers' records against a snapshot of the final state."""
    history = sorted(events, key=lambda e: e.get("ns", 0))
    verdict = RefereeVerdict()
    out = verdict.violations
    for event in history:
        kind = event.get("t")
        if kind == "stale-accept":
            out.append(_stale_accept(event))
        elif kind == "error":
            out.append(
                violation(
                    f"{event.get('finding', 'ERROR')}: {_who(event)}: {event.get('detail')}",
                    str(event.get("surface", "")),
                )
            )
        elif kind == "fatal":
            out.append(violation(f"FATAL: {_who(event)}: {event.get('detail')}"))
    grants = _check_grants(history, out)
    invokes = {e["id"]: e for e in history if e.get("t") == "invoke"}
    _check_accepts(history, grants, invokes, out)
    unknown = unfinished_ids(history)
    for run_id in runs:
        ops = _serial_ops(history, invokes, unknown, run_id, out)
        check_journal(state, run_id, ops, out, verdict.unknown)
        check_meta(state, run_id, ops, out, verdict.unknown)
        check_blobs(state, run_id, ops, out, verdict.unknown)
    check_other_and_victims(state, history, out)
    for op_id, call in unknown.items():
        if call.get("op") not in SERIAL_CALLS or call.get("stale"):
            verdict.unknown.append(
                {
                    "id": op_id,
                    "op": call.get("op"),
                    "run": call.get("run"),
                    "resolved": _untraceable(str(call.get("op"))),
                }
            )
    return verdict


def _stale_accept(event: Event) -> Violation:
    """A writer's probe that the store should have refused and accepted instead."""
    surface = str(event.get("surface"))
    words = SURFACE_WORDS.get(surface, surface)
    if surface == "cross-run-live":
        return violation(
            f"CROSS-RUN ACCEPT: {_who(event)}'s {words} was accepted under its lease on "
            f"{event.get('run')} epoch {event.get('epoch')} ({event.get('id')})",
            surface,
        )
    return violation(
        f"STALE ACCEPT: {_who(event)}'s {words} on {event.get('run')} was accepted "
        f"with epoch {event.get('epoch')} after a later epoch superseded it "
        f"({event.get('id')})",
        surface,
    )


def _check_grants(
    history: list[Event], out: list[Violation]
) -> dict[tuple[str, int], tuple[str, int]]:
    """Epoch granted twice; a holder's grants of one run not strictly increasing."""
    grants: dict[tuple[str, int], tuple[str, int]] = {}
    last: dict[tuple[str, str], int] = {}
    for event in history:
        if event.get("t") != "grant":
            continue
        run_id, epoch, who = event["run"], int(event["epoch"]), _who(event)
        if (run_id, epoch) in grants:
            out.append(
                violation(
                    f"DOUBLE GRANT: {run_id} epoch {epoch} granted to {grants[run_id, epoch][0]} and {who}"
                )
            )
        else:
            grants[run_id, epoch] = (who, int(event.get("ns", 0)))
        previous = last.get((who, run_id))
        if previous is not None and epoch <= previous:
            out.append(
                violation(
                    f"GRANTS NOT INCREASING: {who} got {run_id} epoch {epoch} after epoch {previous}"
                )
            )
        last[who, run_id] = epoch
    return grants


def _check_accepts(
    history: list[Event],
    grants: dict[tuple[str, int], tuple[str, int]],
    invokes: dict[str, Event],
    out: list[Violation],
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
        surface = str(event.get("surface", ""))
        granted = grants.get((run_id, epoch))
        if granted is None:
            out.append(
                violation(
                    f"ACCEPT WITHOUT GRANT: {who} {event.get('surface')} on {run_id} epoch {epoch}",
                    surface,
                )
            )
        elif granted[0] != who:
            out.append(
                violation(
                    f"ACCEPT UNDER ANOTHER WRITER'S EPOCH: {who} {event.get('surface')} on {run_id} "
                    f"under epoch {epoch}, granted to {granted[0]}",
                    surface,
                )
            )
        call = invokes.get(event.get("id", ""))
        if call is None or run_id not in highest:
            continue
        times, best = highest[run_id]
        index = bisect.bisect_left(times, int(call.get("ns", 0))) - 1
        if index >= 0 and best[index] > epoch:
            out.append(
                violation(
                    f"STALE ACCEPT: {who} {event.get('surface')} on {run_id} under epoch {epoch} "
                    f"was invoked after epoch {best[index]} had been granted",
                    surface,
                )
            )


def _serial_ops(
    history: list[Event],
    invokes: dict[str, Event],
    unknown: dict[str, Event],
    run_id: str,
    out: list[Violation],
) -> list[SerialOp]:
    """Accepted and unknown-outcome mutations of ``run_id`` in (epoch, counter) order."""
    ops: list[SerialOp] = []
    for event in history:
        if (
            event.get("t") == "accept"
            and event.get("run") == run_id
            and event.get("surface") in MUTATIONS
        ):
            surface = "append" if event["surface"] == "marker" else event["surface"]
            ops.append(
                SerialOp(
                    surface,
                    int(event["epoch"]),
                    int(event["counter"]),
                    str(event["nonce"]),
                    True,
                    str(event.get("id")),
                    event.get("ref"),
                    event.get("seq"),
                )
            )
    for op_id, call in unknown.items():
        if (
            call.get("run") == run_id
            and call.get("op") in SERIAL_CALLS
            and not call.get("stale")
        ):
            ops.append(
                SerialOp(
                    call["op"],
                    int(call["epoch"]),
                    int(call["counter"]),
                    str(call.get("nonce")),
                    False,
                    op_id,
                    call.get("ref"),
                    call.get("seq"),
                )
            )
    ops.sort(key=lambda op: (op.epoch, op.counter, not op.certain))
    for before, after in pairwise(ops):
        if (before.epoch, before.counter) == (after.epoch, after.counter):
            out.append(
                violation(
                    f"DUPLICATE POSITION: {run_id} epoch {before.epoch} counter {before.counter} "
                    f"({before.op_id}, {after.op_id})"
                )
            )
    return ops


def _untraceable(op: str) -> str:
    """How an unknown call without a soak-run slot is settled."""
    if op == "acquire":
        return "maybe granted, never used (epochs stay unique: checked)"
    if op in ("stale-append", "stale-meta", "stale-blob-put"):
        return "no trace in the final state (a stale nonce there is a violation)"
    if op.startswith("victim-"):
        return "victim left unfinished (only completed victims are checked)"
    return "leaves no durable trace (lease rows are not compared)"
