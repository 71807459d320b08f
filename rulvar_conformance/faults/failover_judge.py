"""The failover soak's judge: what survived the failovers, per replication mode.

Pure: it reads the writers' records (``failover_writer``), the fault driver's
records (``fault``, ``promoted``, ``healed``) and the journal of every run as the
surviving cluster's primary serves it after the last fault, and returns figures
plus violations. Figures (issue 34, item 2):

- acknowledged writes lost: accepted appends whose nonce is not on the
  surviving timeline; those acknowledged after the promotion that ended their
  fault (so by a demoted primary: the promoted one's timeline is the surviving
  one) are counted apart;
- epochs handed out twice: a grant whose epoch is not above every epoch granted
  on that run before it (a takeover the failover rolled back, then reissued);
- stale writes on the surviving timeline: entries whose append was invoked
  after another owner had been granted a higher epoch on the run, or that sit
  after a higher epoch's entry in the run's journal (the fence let them in);
- unknown outcomes (``StoreUnavailableError``, or no completion) and how each
  resolved: an append is applied when its nonce survived, not applied else;
  a call that failed while connecting was never sent; any other lease call
  resolves itself (the lease lapses at its ttl);
- time from each fault to every writer's next durable write (its next
  acknowledged append that is on the surviving timeline: an append a zombie
  acknowledged and the failover then lost is no recovery), and from each
  promotion to every writer's first durable write after it.

In ``sync-strict`` and ``quorum`` (``PROMISED``) every loss figure must be 0; in
``async`` and ``sync`` they are measured and shown, never a violation. In every
mode a fault with no promotion, a writer that never wrote again after a fault,
an untyped exception or a writer that died or hung is a violation.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rulvar_conformance.soak.events import Event

__all__ = ["FAULT_KINDS", "PROMISED", "FailoverVerdict", "judge_failover"]

FAULT_KINDS: Final = ("kill", "zombie", "isolate", "switchover")
"""Leader host death, leader zombie (Patroni frozen), leader cut off, planned switchover."""
PROMISED: Final = frozenset({"sync-strict", "quorum"})
"""Modes that promise no acknowledged write lost across a failover."""
RECOVERY_LIMIT_S: Final = 60.0
RECOVERY_TARGET_S: Final = 5.0
"""Issue 34's target: every writer's first durable write within this of each promotion.
A speed figure, so reported (rows and ``recovery_target``), never a violation."""
"""A writer still running this long after a promotion must have written again."""
_NS: Final = 1_000_000_000
_NOT_SENT: Final = "could not connect to the server"
"""The store's words for a call that failed while connecting: never sent."""


@dataclass
class FailoverVerdict:
    """Figures (JSON-ready), the rows the CLI prints, and violations (one line each)."""

    figures: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[str, str]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


@dataclass
class _Fault:
    n: int
    kind: str
    ns: int
    node: str
    promoted_ns: int | None = None
    end_ns: int = 0
    lost: int = 0
    lost_after_promotion: int = 0
    recovery_s: list[float] = field(default_factory=list)
    recovery_from_promotion_s: list[float] = field(default_factory=list)


def _faults(actions: Sequence[Event], stop_ns: int) -> list[_Fault]:
    faults: list[_Fault] = []
    for event in sorted(actions, key=lambda e: int(e["ns"])):
        kind = event.get("t")
        if kind == "fault":
            faults.append(
                _Fault(
                    int(event["n"]),
                    str(event["kind"]),
                    int(event["ns"]),
                    str(event.get("node", "")),
                )
            )
        elif kind == "promoted" and faults and faults[-1].promoted_ns is None:
            faults[-1].promoted_ns = int(event["ns"])
        elif kind == "healed" and faults:
            faults[-1].end_ns = int(event["ns"])
    for index, fault in enumerate(faults):
        if not fault.end_ns:
            fault.end_ns = faults[index + 1].ns if index + 1 < len(faults) else stop_ns
    return faults


def _window(faults: Sequence[_Fault], ns: int) -> _Fault | None:
    """The fault whose window holds ``ns``: after the previous fault's end, up to its own."""
    for fault in faults:
        if ns <= fault.end_ns:
            return fault
    return None


def judge_failover(
    events: Iterable[Event],
    actions: Iterable[Event],
    final: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    mode: str,
    stop_ns: int,
    hung: Sequence[int] = (),
    planned: Mapping[str, int] | None = None,
) -> FailoverVerdict:
    """Judge one failover soak (see the module docstring).

    ``final``: each run's journal entries as the surviving primary loads them.
    ``hung``: writers that did not exit when told to stop. ``planned``: faults of
    each kind the run had to inject (fewer is a violation).
    """
    history = sorted(events, key=lambda e: int(e.get("ns", 0)))
    faults = _faults(list(actions), stop_ns)
    verdict = FailoverVerdict()
    out = verdict.violations
    surviving: dict[str, tuple[str, int, int]] = {}  # nonce -> (run, epoch, position)
    for run_id, entries in final.items():
        for position, entry in enumerate(entries):
            value = entry.get("value")
            if isinstance(value, Mapping) and "nonce" in value:
                surviving[str(value["nonce"])] = (
                    run_id,
                    int(value.get("epoch", 0)),
                    position,
                )
    accepts = [e for e in history if e.get("t") == "accept"]
    lost = [e for e in accepts if str(e.get("nonce")) not in surviving]
    lost_after = 0
    for event in lost:
        fault = _window(faults, int(event["ns"]))
        if fault is None:
            continue
        fault.lost += 1
        if fault.promoted_ns is not None and int(event["ns"]) > fault.promoted_ns:
            fault.lost_after_promotion += 1
            lost_after += 1
    reissued = _reissued(history)
    stale = _stale(history, final, surviving)
    unknown = _unknown(history, surviving)
    errors = Counter(
        f"{e.get('op')}: {e.get('exc')}"
        for e in history
        if e.get("t") == "error" and not e.get("typed")
    )
    typed_errors = Counter(
        f"{e.get('op')}: {e.get('exc')}"
        for e in history
        if e.get("t") == "error" and e.get("typed")
    )
    _recovery(history, faults, surviving, stop_ns, out)
    per_kind = _per_kind(faults)
    verdict.figures = {
        "mode": mode,
        "faults": per_kind,
        "acknowledged_appends": len(accepts),
        "acknowledged_writes_lost": len(lost),
        "lost_acknowledged_after_promotion": lost_after,
        "epochs_reissued": len(reissued),
        "stale_writes_landed": len(stale),
        "unknown_outcomes": unknown,
        "order_refusals": sum(1 for e in history if e.get("t") == "order"),
        "fence_refusals": sum(1 for e in history if e.get("t") == "fence-kick"),
        "typed_errors": dict(typed_errors),
        "untyped_errors": dict(errors),
        "hung_writers": list(hung),
        "recovery_target": {
            "limit_s": RECOVERY_TARGET_S,
            "missed": [
                f"fault {f.n} ({f.kind}): {max(f.recovery_from_promotion_s):.1f} s"
                for f in faults
                if f.recovery_from_promotion_s
                and max(f.recovery_from_promotion_s) > RECOVERY_TARGET_S
            ],
        },
        "examples": {
            "lost": [str(e.get("nonce")) for e in lost[:5]],
            "reissued": reissued[:5],
            "stale": stale[:5],
        },
    }
    if mode in PROMISED:
        for count, what in (
            (len(lost), "ACKNOWLEDGED WRITES LOST"),
            (lost_after, "WRITES ACKNOWLEDGED BY A DEMOTED PRIMARY"),
            (len(reissued), "EPOCHS HANDED OUT TWICE"),
            (len(stale), "STALE WRITES LANDED"),
        ):
            if count:
                out.append(f"{what}: {count} in mode {mode}, which promises none")
    for fault in faults:
        if fault.promoted_ns is None:
            out.append(
                f"NO PROMOTION: fault {fault.n} ({fault.kind} of {fault.node}) saw no new primary"
            )
    if errors:
        out.append(f"UNTYPED EXCEPTIONS: {dict(errors)}")
    fatal = [e for e in history if e.get("t") == "fatal"]
    if fatal:
        out.append(
            f"WRITER DIED: {len(fatal)} writer(s): {str(fatal[0].get('detail'))[:300]}"
        )
    if hung:
        out.append(f"HUNG WRITERS: {list(hung)} did not exit when told to stop")
    for kind, goal in (planned or {}).items():
        done = per_kind.get(kind, {}).get("count", 0)
        if done < goal:
            out.append(f"TOO FEW FAULTS: {kind} {done} of {goal}")
    verdict.rows = _rows(verdict.figures)
    return verdict


def _reissued(history: Sequence[Event]) -> list[str]:
    """Grants whose epoch is not above every epoch granted on their run before them."""
    top: dict[str, int] = {}
    found: list[str] = []
    for event in history:
        if event.get("t") != "grant":
            continue
        run_id, epoch = str(event["run"]), int(event["epoch"])
        if run_id in top and epoch <= top[run_id]:
            found.append(
                f"{run_id} epoch {epoch} to {event.get('owner')} (already {top[run_id]})"
            )
        top[run_id] = max(epoch, top.get(run_id, epoch))
    return found


def _stale(
    history: Sequence[Event],
    final: Mapping[str, Sequence[Mapping[str, Any]]],
    surviving: Mapping[str, tuple[str, int, int]],
) -> list[str]:
    """Surviving entries a superseded owner wrote (see the module docstring)."""
    found: dict[str, str] = {}
    grants: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for event in history:
        if event.get("t") == "grant":
            grants[str(event["run"])].append(
                (int(event["ns"]), int(event["epoch"]), str(event.get("owner")))
            )
    for event in history:
        if event.get("t") != "invoke" or event.get("op") != "append":
            continue
        nonce = str(event.get("nonce"))
        if nonce not in surviving:
            continue
        run_id, epoch, invoked = (
            str(event["run"]),
            int(event["epoch"]),
            int(event["ns"]),
        )
        higher = [g for g in grants.get(run_id, []) if g[0] < invoked and g[1] > epoch]
        if higher:
            found[nonce] = (
                f"{nonce} on {run_id}: epoch {epoch} after epoch {higher[0][1]} was granted"
            )
    for run_id, entries in final.items():
        top = 0
        for entry in entries:
            value = entry.get("value")
            if not isinstance(value, Mapping) or "epoch" not in value:
                continue
            epoch = int(value["epoch"])
            if epoch < top:
                nonce = str(value.get("nonce"))
                found.setdefault(
                    nonce,
                    f"{nonce} on {run_id}: epoch {epoch} after an epoch {top} entry",
                )
            top = max(top, epoch)
    return list(found.values())


def _unknown(history: Sequence[Event], surviving: Mapping[str, Any]) -> dict[str, Any]:
    """Unknown outcomes per call kind, and how each resolved."""
    completed = {e.get("id") for e in history if e.get("t") != "invoke" and e.get("id")}
    unknown = [e for e in history if e.get("t") == "unknown"]
    unknown += [
        e
        for e in history
        if e.get("t") == "invoke"
        and e.get("id") not in completed
        and e.get("op") == "append"
    ]
    resolved: dict[str, Counter[str]] = defaultdict(Counter)
    for event in unknown:
        op = str(event.get("op"))
        if op == "append":
            how = "applied" if str(event.get("nonce")) in surviving else "not applied"
        elif _NOT_SENT in str(event.get("detail", "")):
            how = "no server reached, nothing sent"
        elif op in ("acquire", "release"):
            how = "lease lapses at its ttl"
        else:
            how = "read, nothing to resolve"
        resolved[op][how] += 1
    return {
        "count": len(unknown),
        "resolved": {op: dict(c) for op, c in resolved.items()},
    }


def _recovery(
    history: Sequence[Event],
    faults: Sequence[_Fault],
    surviving: Mapping[str, Any],
    stop_ns: int,
    out: list[str],
) -> None:
    """Per fault and writer: seconds to its next durable (acknowledged, surviving) append."""
    accepts: dict[int, list[int]] = defaultdict(list)
    alive: dict[int, tuple[int, int]] = {}
    for event in history:
        writer = int(event.get("w", -1))
        ns = int(event.get("ns", 0))
        first, last = alive.get(writer, (ns, ns))
        alive[writer] = (min(first, ns), max(last, ns))
        if event.get("t") == "accept" and str(event.get("nonce")) in surviving:
            accepts[writer].append(ns)
    for fault in faults:
        for writer, (first, last) in sorted(alive.items()):
            if first > fault.ns:
                continue
            following = next((ns for ns in accepts[writer] if ns > fault.ns), None)
            if following is None:
                since = fault.promoted_ns or fault.ns
                if (min(last, stop_ns) - since) / _NS >= RECOVERY_LIMIT_S:
                    out.append(
                        f"NO RECOVERY: writer {writer} wrote nothing durable after fault {fault.n} ({fault.kind})"
                    )
                continue
            fault.recovery_s.append((following - fault.ns) / _NS)
            if fault.promoted_ns is not None:
                promoted = fault.promoted_ns
                after = next((ns for ns in accepts[writer] if ns > promoted), None)
                if after is not None:
                    fault.recovery_from_promotion_s.append((after - promoted) / _NS)


def _per_kind(faults: Sequence[_Fault]) -> dict[str, dict[str, Any]]:
    kinds: dict[str, dict[str, Any]] = {}
    for kind in FAULT_KINDS:
        mine = [f for f in faults if f.kind == kind]
        if not mine:
            continue
        promote = [
            (f.promoted_ns - f.ns) / _NS for f in mine if f.promoted_ns is not None
        ]
        every = [max(f.recovery_s) for f in mine if f.recovery_s]
        from_promotion = [
            max(f.recovery_from_promotion_s)
            for f in mine
            if f.recovery_from_promotion_s
        ]
        kinds[kind] = {
            "count": len(mine),
            "promoted": len(promote),
            "fault_to_promotion_s": [round(s, 1) for s in promote],
            "fault_to_every_writer_s": [round(s, 1) for s in every],
            "promotion_to_every_writer_s": [round(s, 1) for s in from_promotion],
            "acknowledged_lost": sum(f.lost for f in mine),
            "lost_acknowledged_after_promotion": sum(
                f.lost_after_promotion for f in mine
            ),
        }
    return kinds


def _rows(figures: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("replication mode", str(figures["mode"]))]
    for kind, fig in figures["faults"].items():
        rows.append(
            (
                f"{kind} x{fig['count']}",
                f"promoted {fig['promoted']}, fault->promotion {_span(fig['fault_to_promotion_s'])} s, "
                f"fault->every writer's next durable write {_span(fig['fault_to_every_writer_s'])} s "
                f"(from the promotion {_span(fig['promotion_to_every_writer_s'])} s), "
                f"lost {fig['acknowledged_lost']} ({fig['lost_acknowledged_after_promotion']} after the promotion)",
            )
        )
    rows += [
        ("acknowledged appends", str(figures["acknowledged_appends"])),
        (
            "acknowledged writes lost",
            f"{figures['acknowledged_writes_lost']} "
            f"({figures['lost_acknowledged_after_promotion']} acknowledged by a demoted primary after the promotion)",
        ),
        ("epochs handed out twice", str(figures["epochs_reissued"])),
        ("stale writes on the surviving timeline", str(figures["stale_writes_landed"])),
        (
            "unknown outcomes",
            f"{figures['unknown_outcomes']['count']}: "
            + "; ".join(
                f"{op} "
                + ", ".join(f"{how} x{n}" for how, n in sorted(how_many.items()))
                for op, how_many in sorted(
                    figures["unknown_outcomes"]["resolved"].items()
                )
            ),
        ),
        (
            "refused",
            f"fence {figures['fence_refusals']}, seq order {figures['order_refusals']}, "
            f"typed errors {sum(figures['typed_errors'].values())}",
        ),
        ("untyped exceptions", str(sum(figures["untyped_errors"].values()))),
        (
            f"every writer durable within {figures['recovery_target']['limit_s']:g} s "
            "of each promotion",
            "yes"
            if not figures["recovery_target"]["missed"]
            else "no: " + "; ".join(figures["recovery_target"]["missed"]),
        ),
    ]
    return rows


def _span(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return (
        f"{min(values):.1f}-{max(values):.1f}"
        if len(values) > 1
        else f"{values[0]:.1f}"
    )
