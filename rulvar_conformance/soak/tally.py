"""Counting what a soak did (activity, S8 quorum) and how healthy it was (liveness).

Safety is the referee's; this module only counts and measures, from the writers'
records and the runner's chaos records. Health figures are reported, never
asserted: a loaded machine stretches them without anything being wrong.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields
from itertools import pairwise
from statistics import mean
from typing import Any, Final

from rulvar_conformance.soak.events import COMPLETIONS, Event
from rulvar_conformance.soak.summary import (
    InsidePauses,
    ResumeLatency,
    SoakActivity,
    SoakHealth,
    TakeoverLatency,
)

__all__ = ["DEFAULT_SOAK_QUORUM", "ActivityTally", "SoakQuorum", "health_report"]

WRITE_SUCCESS: Final = frozenset({"accept", "grant", "released", "step", "victim"})


@dataclass(frozen=True)
class SoakQuorum:
    """Minimum counts before a soak may stop (S8); chaos counts are ours, beyond S8."""

    epochs: int = 4
    stale_rejects: int = 16
    appends: int = 8
    meta: int = 5
    blob_puts: int = 5
    blob_deletes: int = 1
    victims: int = 1
    live_cross_rejects: int = 1
    takeovers: int = 0
    stale_probes: int = 0
    holder_deletes: int = 0
    pauses: int = 0
    kills: int = 0

    def missing(self, activity: SoakActivity) -> list[str]:
        """``name have/need`` for every count still below its minimum."""
        return [
            f"{item.name} {getattr(activity, item.name)}/{getattr(self, item.name)}"
            for item in fields(self)
            if getattr(activity, item.name) < getattr(self, item.name)
        ]


DEFAULT_SOAK_QUORUM: Final = SoakQuorum()


class ActivityTally:
    """Running counts over records as they arrive (the runner re-counts every 100 ms)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._last_owner: dict[str, str] = {}

    def add(self, event: Event) -> None:
        kind = event.get("t")
        counts = self.counts
        if kind == "grant":
            counts["epochs"] += 1
            who = f"{event.get('w')}.{event.get('inc')}"
            previous = self._last_owner.get(event["run"])
            if previous is not None and previous != who:
                counts["takeovers"] += 1
            self._last_owner[event["run"]] = who
        elif kind == "accept":
            surface = event.get("surface")
            key = {
                "marker": "appends",
                "append": "appends",
                "meta": "meta",
                "blob-put": "blob_puts",
                "blob-delete": "blob_deletes",
                "delete": "holder_deletes",
            }.get(str(surface))
            if key:
                counts[key] += 1
            counts["accepted"] += 1
        elif kind in ("stale-reject", "stale-accept"):
            counts["stale_probes"] += 1
            counts["stale_rejects" if kind == "stale-reject" else "stale_accepts"] += 1
        elif kind == "victim":
            counts["victims"] += 1
        elif kind == "live-cross-reject":
            counts["live_cross_rejects"] += 1
        elif kind == "busy":
            counts["busy_retries"] += 1
        elif kind in ("stall", "released", "fence-kick", "unknown", "error", "fatal"):
            counts[
                {
                    "stall": "stalls",
                    "released": "releases",
                    "fence-kick": "fence_kicks",
                    "unknown": "unknown_logged",
                    "error": "errors",
                    "fatal": "fatals",
                }[kind]
            ] += 1
        elif kind == "pause":
            counts["pauses"] += 1
            if event.get("inside"):
                counts["pauses_inside_call"] += 1
            if event.get("txn"):
                counts["pauses_in_transaction"] += 1
        elif kind == "kill":
            counts["kills"] += 1
            if event.get("inside"):
                counts["kills_inside_call"] += 1
        elif kind == "spawn":
            counts["processes"] += 1

    def snapshot(self) -> SoakActivity:
        return SoakActivity.from_counts(self.counts)


def _writer_of(event: Event) -> int:
    return int(event.get("w", -1))


def health_report(
    events: Iterable[Event], chaos: list[Event], start_ns: int, stop_ns: int
) -> SoakHealth:
    """Liveness figures: service per writer, the longest write drought and its cause,
    busy retries, and the time from each SIGCONT to the paused writer's next outcome."""
    ordered = sorted(events, key=lambda e: e.get("ns", 0))
    served: Counter[int] = Counter()
    busy: Counter[int] = Counter()
    writes: list[int] = []
    for event in ordered:
        if event.get("t") == "accept":
            served[_writer_of(event)] += 1
        if event.get("t") == "busy":
            busy[_writer_of(event)] += 1
        if (
            event.get("t") in WRITE_SUCCESS
            and start_ns <= event.get("ns", 0) <= stop_ns
        ):
            writes.append(int(event["ns"]))
    # Droughts are measured once writing has begun; the boot is reported apart.
    first_write_ms = (writes[0] - start_ns) / 1e6 if writes else None
    writes = writes[:1] + writes[1:] + [stop_ns] if writes else [start_ns, stop_ns]
    writers = sorted(
        {_writer_of(e) for e in chaos if e.get("t") == "spawn"} | set(served)
    )
    per_writer = {str(w): served.get(w, 0) for w in writers}
    counts = list(per_writer.values()) or [0]
    gap_ms, gap_from, gap_to = 0.0, writes[0], writes[0]
    for before, after in pairwise(writes):
        if (after - before) / 1e6 > gap_ms:
            gap_ms, gap_from, gap_to = (after - before) / 1e6, before, after
    return SoakHealth(
        first_write_ms=None if first_write_ms is None else round(first_write_ms, 1),
        accepted_per_writer=per_writer,
        least_served=min(counts),
        mean_served=round(mean(counts), 1),
        busy_retries=sum(busy.values()),
        busy_per_writer={str(w): busy.get(w, 0) for w in writers},
        longest_write_drought_ms=round(gap_ms, 1),
        drought_cause=_drought_cause(ordered, chaos, gap_from, gap_to),
        resume_to_next_outcome_ms=_resume_latencies(ordered, chaos),
        kill_to_takeover_ms=_kill_takeovers(ordered, chaos),
        pauses_inside_a_call=_inside_pauses(ordered, chaos),
    )


def _drought_cause(ordered: list[Event], chaos: list[Event], lo: int, hi: int) -> str:
    """Name what overlapped the drought: a pause inside a call, a kill, stalls, load."""
    pauses = _pause_windows(chaos)
    overlapping = [p for p in pauses if p["from"] < hi and p["to"] > lo]
    others_busy = sum(
        1 for e in ordered if e.get("t") == "busy" and lo <= e.get("ns", 0) <= hi
    )
    inside = [p for p in overlapping if p.get("inside")]
    if inside:
        p = max(inside, key=lambda p: min(p["to"], hi) - max(p["from"], lo))
        return (
            f"w{p['w']} was SIGSTOPped inside {p['inside']} for {(p['to'] - p['from']) / 1e6:.0f} ms "
            f"(held the write lock: {others_busy} busy retries by others meanwhile)"
            if others_busy
            else f"w{p['w']} was SIGSTOPped inside {p['inside']} for {(p['to'] - p['from']) / 1e6:.0f} ms"
        )
    kills = [c for c in chaos if c.get("t") == "kill" and lo <= c.get("ns", 0) <= hi]
    stalls = [
        e
        for e in ordered
        if e.get("t") == "stall"
        and e.get("ns", 0) <= hi
        and e.get("ns", 0) + int(e.get("ms", 0)) * 1_000_000 >= lo
    ]
    parts = []
    if overlapping:
        parts.append(f"{len(overlapping)} writer(s) SIGSTOPped between calls")
    if kills:
        parts.append(f"{len(kills)} writer(s) SIGKILLed")
    if stalls:
        parts.append(f"{len(stalls)} lease(s) left to expire by stalling holders")
    if others_busy:
        parts.append(f"{others_busy} busy retries")
    # A fault layer's actions (rulvar_conformance.faults) started in the drought.
    faults = Counter(
        str(c.get("t"))
        for c in chaos
        if c.get("t") in ("server-kill", "partition", "reset")
        and lo <= c.get("ns", 0) <= hi
    )
    parts.extend(f"{n} {kind}(s)" for kind, n in sorted(faults.items()))
    return "; ".join(parts) or "no fault overlapped it (scheduling or machine load)"


def _inside_pauses(ordered: list[Event], chaos: list[Event]) -> InsidePauses:
    """Pauses that landed inside a store call, and whether everyone else stopped writing.

    On SQLite a writer frozen inside its write transaction holds the file's write
    lock: the others wait in the busy handler and nobody writes until SIGCONT.
    """
    writes = sorted(
        (int(e.get("ns", 0)), _writer_of(e))
        for e in ordered
        if e.get("t") in WRITE_SUCCESS
    )
    times = [ns for ns, _ in writes]
    rows = []
    for window in _pause_windows(chaos):
        if not window.get("inside"):
            continue
        lo = bisect.bisect_left(times, window["from"])
        hi = bisect.bisect_right(times, window["to"])
        others = sum(1 for _, w in writes[lo:hi] if w != window["w"])
        started = any(w != window["w"] for _, w in writes[:lo])
        rows.append((window, others if started else -1))
    blocked = [(w["to"] - w["from"]) / 1e6 for w, others in rows if others == 0]
    return InsidePauses(
        count=len(rows),
        before_others_wrote=sum(1 for _, others in rows if others < 0),
        blocked_everyone=len(blocked),
        longest_blocked_ms=round(max(blocked), 1) if blocked else 0.0,
        calls=tuple(sorted({str(w["inside"]) for w, _ in rows})),
    )


def _pause_windows(chaos: list[Event]) -> list[dict[str, Any]]:
    open_pauses: dict[tuple[int, int], Event] = {}
    windows: list[dict[str, Any]] = []
    for event in sorted(chaos, key=lambda e: e.get("ns", 0)):
        key = (_writer_of(event), int(event.get("inc", 0)))
        if event.get("t") == "pause":
            open_pauses[key] = event
        elif event.get("t") == "resume" and key in open_pauses:
            start = open_pauses.pop(key)
            windows.append(
                {
                    "w": key[0],
                    "inc": key[1],
                    "from": start["ns"],
                    "to": event["ns"],
                    "inside": start.get("inside"),
                }
            )
    return windows


_TENURE_ENDS: Final = frozenset({"released", "fence-kick", "stale-reject", "stall"})


def _kill_takeovers(ordered: list[Event], chaos: list[Event]) -> TakeoverLatency:
    """For each run a killed writer held, the wait until another writer's grant."""
    holder: dict[str, tuple[int, int]] = {}
    held_at_kill: list[tuple[str, tuple[int, int], int]] = []
    kills = sorted(
        (e for e in chaos if e.get("t") == "kill"), key=lambda e: int(e.get("ns", 0))
    )
    writes = [e for e in ordered if e.get("t") == "grant" or e.get("t") in _TENURE_ENDS]
    position = 0
    for kill in kills:
        at = int(kill.get("ns", 0))
        while position < len(writes) and int(writes[position].get("ns", 0)) <= at:
            event = writes[position]
            run, who = (
                str(event.get("run")),
                (_writer_of(event), int(event.get("inc", 0))),
            )
            if event.get("t") == "grant":
                holder[run] = who
            elif holder.get(run) == who:
                del holder[run]
            position += 1
        victim = (_writer_of(kill), int(kill.get("inc", 0)))
        held_at_kill += [
            (run, victim, at) for run, who in holder.items() if who == victim
        ]
    kill_waits: list[float] = []
    ask_waits: list[float] = []
    refused = 0
    for run, victim, at in held_at_kill:
        taken = _taken_over(ordered, run, victim, at)
        if taken is None:
            continue
        grant, first_ask, refusals = taken
        kill_waits.append((grant - at) / 1e6)
        ask_waits.append((grant - first_ask) / 1e6)
        refused += refusals
    if not kill_waits:
        return TakeoverLatency()
    return TakeoverLatency(
        count=len(kill_waits),
        mean=round(mean(kill_waits), 1),
        max=round(max(kill_waits), 1),
        ask_mean=round(mean(ask_waits), 1),
        ask_max=round(max(ask_waits), 1),
        refused=refused,
    )


def _taken_over(
    ordered: list[Event], run: str, victim: tuple[int, int], at: int
) -> tuple[int, int, int] | None:
    """The first grant of ``run`` to another writer after ``at``, the first ask
    for it after ``at`` (or ``at``), and the asks refused in between; ``None``
    if no grant."""
    first_ask: int | None = None
    refusals = 0
    for event in ordered:
        ns = int(event.get("ns", 0))
        if ns <= at or event.get("run") != run:
            continue
        if (_writer_of(event), int(event.get("inc", 0))) == victim:
            continue
        kind = event.get("t")
        if kind == "invoke" and event.get("op") == "acquire" and first_ask is None:
            first_ask = ns
        elif kind == "held":
            refusals += 1
        elif kind == "grant":
            # No ask began after the kill: the granted one was in flight at it.
            return ns, at if first_ask is None else first_ask, refusals
    return None


def _resume_latencies(ordered: list[Event], chaos: list[Event]) -> ResumeLatency:
    after: dict[tuple[int, int], list[int]] = defaultdict(list)
    for event in ordered:
        if event.get("t") in COMPLETIONS or event.get("t") in (
            "busy",
            "stall",
            "victim",
        ):
            after[_writer_of(event), int(event.get("inc", 0))].append(
                int(event.get("ns", 0))
            )
    started = {
        (_writer_of(e), int(e.get("inc", 0))): int(e.get("ns", 0))
        for e in ordered
        if e.get("t") == "start"
    }
    latencies = []
    booting = 0
    for window in _pause_windows(chaos):
        key = (window["w"], window["inc"])
        if key not in started or started[key] > window["from"]:
            booting += 1  # paused while importing and opening: not a store latency
            continue
        nxt = next((t for t in after.get(key, []) if t >= window["to"]), None)
        if nxt is not None:
            latencies.append((nxt - window["to"]) / 1e6)
    if not latencies:
        return ResumeLatency(count=0, paused_while_booting=booting)
    return ResumeLatency(
        count=len(latencies),
        paused_while_booting=booting,
        mean=round(mean(latencies), 1),
        max=round(max(latencies), 1),
    )
