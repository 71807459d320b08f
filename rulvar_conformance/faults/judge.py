"""What the faults did and whether the store kept its promises through them.

Pure: it reads the writers' records, the runner's chaos records and how the
referee resolved each unknown outcome, and returns figures for the report plus
violations:

- a cut-off holder's write accepted after the heal although another writer
  had taken its run over while it was cut off (the fence must refuse it);
- a writer that never succeeded again after a heal or a server restart while
  the storm ran on for ``RECOVERY_S`` (its pool did not recover by itself);
- an acknowledged write missing from the final state (the referee's LOST WRITE
  findings, counted here as the figure the server chaos promises to keep at 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final

from rulvar_conformance.soak.events import Event
from rulvar_conformance.soak.violations import Violation, violation

__all__ = ["RECOVERY_S", "SUCCESS", "judge_faults"]

RECOVERY_S: Final = 15.0
"""A writer still alive this long after a heal or restart must have succeeded again."""
SUCCESS: Final = frozenset({"accept", "grant", "released", "stale-reject", "victim"})
"""Records that show a writer's store answered it: its connection works again."""
_NS: Final = 1_000_000_000


def _who(event: Event) -> tuple[int, int]:
    return int(event.get("w", -1)), int(event.get("inc", -1))


def judge_faults(
    events: Iterable[Event],
    chaos: Iterable[Event],
    unknown: Iterable[Mapping[str, Any]],
    stop_ns: int,
    prior: Iterable[Violation] = (),
) -> tuple[dict[str, Any], list[Violation]]:
    """Figures (``rows`` for the CLI, the rest for JSON) and violations."""
    history = sorted(events, key=lambda e: e.get("ns", 0))
    actions = sorted(chaos, key=lambda e: e.get("ns", 0))
    resolved = {str(call.get("id")): str(call.get("resolved", "")) for call in unknown}
    by_writer: dict[tuple[int, int], list[Event]] = {}
    for event in history:
        by_writer.setdefault(_who(event), []).append(event)
    ends = {_who(e): int(e["ns"]) for e in actions if e.get("t") == "kill"}
    out: list[Violation] = []
    figures: dict[str, Any] = {}
    partitions = _partitions(history, actions, by_writer, resolved, ends, stop_ns, out)
    if partitions["count"]:
        figures["partitions"] = partitions
    resets = [e for e in actions if e.get("t") == "reset"]
    if resets:
        figures["resets"] = {
            "actions": len(resets),
            "with_connections": sum(1 for e in resets if int(e.get("sockets", 0)) > 0),
            "connections_reset": sum(int(e.get("sockets", 0)) for e in resets),
        }
    degrades = [e for e in actions if e.get("t") == "degrade"]
    if degrades:
        restores = [e for e in actions if e.get("t") == "restore"]
        figures["degrades"] = {
            "count": len(degrades),
            "what": sorted({str(e.get("what")) for e in degrades}),
            "packets_passed": sum(int(e.get("sent", 0)) for e in restores),
            "packets_dropped": sum(int(e.get("dropped", 0)) for e in restores),
        }
    server = _server(history, actions, by_writer, ends, stop_ns, out)
    if server["kills"]:
        figures["server"] = server
    unknown_calls = [e for e in history if e.get("t") == "unknown"]
    invokes = {e["id"]: int(e["ns"]) for e in history if e.get("t") == "invoke"}
    durations = [
        (int(e["ns"]) - invokes[e["id"]]) / 1e6
        for e in unknown_calls
        if e.get("id") in invokes
    ]
    figures["unknown_outcomes"] = {
        "logged": len(unknown_calls),
        "longest_ms": round(max(durations, default=0.0), 1),
        "resolved": dict(Counter(resolved.values())),
    }
    figures["lost_acknowledged_writes"] = sum(
        1 for item in prior if item.kind in ("LOST WRITE", "COMPANION LOST ACK")
    )
    figures["rows"] = _rows(figures)
    return figures, out


def _first_success_after(records: list[Event], ns: int) -> int | None:
    for event in records:
        if int(event.get("ns", 0)) > ns and event.get("t") in SUCCESS:
            return int(event["ns"])
    return None


def _partitions(
    history: list[Event],
    actions: list[Event],
    by_writer: dict[tuple[int, int], list[Event]],
    resolved: dict[str, str],
    ends: dict[tuple[int, int], int],
    stop_ns: int,
    out: list[Violation],
) -> dict[str, Any]:
    cuts = [e for e in actions if e.get("t") == "partition"]
    heals = [e for e in actions if e.get("t") == "heal"]
    grants = [e for e in history if e.get("t") == "grant"]
    past_ttl = taken_over = recovered = 0
    after_heal: Counter[str] = Counter()
    in_flight: Counter[str] = Counter()
    recovery_ms: list[float] = []
    for cut in cuts:
        who, cut_ns = _who(cut), int(cut["ns"])
        heal_ns = next(
            (int(h["ns"]) for h in heals if _who(h) == who and int(h["ns"]) >= cut_ns),
            stop_ns,
        )
        run_id, epoch = cut.get("run"), int(cut.get("epoch", 0))
        if int(cut.get("hold_ms", 0)) > int(cut.get("ttl_ms", 0)):
            past_ttl += 1
        records = by_writer.get(who, [])
        superseded_ns = next(
            (
                int(g["ns"])
                for g in grants
                if g.get("run") == run_id
                and int(g["epoch"]) > epoch
                and int(g["ns"]) >= cut_ns
            ),
            None,
        )
        if superseded_ns is not None and superseded_ns <= heal_ns:
            taken_over += 1
        # The calls the cut caught: invoked before it, completed after it (or never).
        done_at = {
            e.get("id"): e for e in records if e.get("t") != "invoke" and e.get("id")
        }
        for call in records:
            if call.get("t") != "invoke" or int(call["ns"]) >= cut_ns:
                continue
            end = done_at.get(call["id"])
            if end is None or int(end["ns"]) > cut_ns:
                kind = str(end.get("t")) if end is not None else "no completion"
                if kind == "unknown" or end is None:
                    kind = f"unknown -> {resolved.get(call['id'], 'not a serial call')}"
                in_flight[kind] += 1
        _after_heal(
            records, run_id, epoch, heal_ns, superseded_ns, after_heal, out, who
        )
        first = _first_success_after(records, heal_ns)
        if first is not None:
            recovered += 1
            recovery_ms.append((first - heal_ns) / 1e6)
        else:
            _no_recovery(who, heal_ns, ends, stop_ns, "heal", out)
    return {
        "count": len(cuts),
        "of_a_holder_past_its_ttl": past_ttl,
        "heals": len(heals),
        "taken_over_while_cut": taken_over,
        "holder_calls_after_heal": dict(after_heal),
        "in_flight_at_cut": dict(in_flight),
        "recovered": recovered,
        "longest_recovery_ms": round(max(recovery_ms, default=0.0), 1),
    }


def _after_heal(
    records: list[Event],
    run_id: Any,
    epoch: int,
    heal_ns: int,
    superseded_ns: int | None,
    tally: Counter[str],
    out: list[Violation],
    who: tuple[int, int],
) -> None:
    """The cut-off holder's calls under its old lease once healed: refused or not."""
    invokes = {
        e["id"]: e
        for e in records
        if e.get("t") == "invoke" and e.get("run") == run_id and e.get("epoch") == epoch
    }
    for event in records:
        call = invokes.get(event.get("id", ""))
        if call is None or event.get("t") == "invoke" or int(call["ns"]) < heal_ns:
            continue
        kind = str(event.get("t"))
        tally[kind] += 1
        if (
            kind == "accept"
            and superseded_ns is not None
            and superseded_ns < int(call["ns"])
        ):
            out.append(
                violation(
                    f"PARTITIONED WRITER ACCEPTED: w{who[0]}.{who[1]}'s {event.get('surface')} "
                    f"on {run_id} under epoch {epoch} was accepted after the heal, although "
                    f"a later epoch was granted while it was cut off ({event.get('id')})",
                    str(event.get("surface", "")),
                )
            )


def _no_recovery(
    who: tuple[int, int],
    since_ns: int,
    ends: dict[tuple[int, int], int],
    stop_ns: int,
    after: str,
    out: list[Violation],
) -> None:
    """A writer alive ``RECOVERY_S`` past ``since_ns`` that never succeeded is stuck."""
    alive_until = ends.get(who, stop_ns)
    if (alive_until - since_ns) / _NS >= RECOVERY_S:
        out.append(
            violation(
                f"NO RECOVERY: w{who[0]}.{who[1]} did not succeed at any call in the "
                f"{(alive_until - since_ns) / _NS:.1f} s it ran after the {after}"
            )
        )


def _server(
    history: list[Event],
    actions: list[Event],
    by_writer: dict[tuple[int, int], list[Event]],
    ends: dict[tuple[int, int], int],
    stop_ns: int,
    out: list[Violation],
) -> dict[str, Any]:
    kills = [e for e in actions if e.get("t") == "server-kill"]
    ups = [e for e in actions if e.get("t") == "server-up"]
    outages = [int(e.get("outage_ms", 0)) for e in ups]
    carried_on = across = 0
    unknown_in_outage = 0
    for kill, up in zip(kills, ups, strict=False):
        down_ns, up_ns = int(kill["ns"]), int(up["ns"])
        unknown_in_outage += sum(
            1
            for e in history
            if e.get("t") == "unknown" and down_ns <= int(e["ns"]) <= up_ns
        )
        for who, records in by_writer.items():
            started = records[0].get("ns", 0) if records else 0
            if int(started) > up_ns or ends.get(who, stop_ns) < up_ns:
                continue  # not alive across this restart
            across += 1
            if _first_success_after(records, up_ns) is not None:
                carried_on += 1
            else:
                _no_recovery(who, up_ns, ends, stop_ns, "server restart", out)
    return {
        "kills": len(kills),
        "restarts": len(ups),
        "outage_ms": outages,
        "processes_killed": sum(int(e.get("processes", 0)) for e in kills),
        "unknown_outcomes_during_outages": unknown_in_outage,
        "writers_across_a_restart": across,
        "writers_that_carried_on": carried_on,
    }


def _rows(figures: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    part = figures.get("partitions")
    if part:
        rows.append(
            (
                "partitions / heals",
                f"{part['count']} / {part['heals']} ({part['of_a_holder_past_its_ttl']} of a "
                f"lease holder past its ttl, {part['taken_over_while_cut']} taken over while cut)",
            )
        )
        rows.append(
            ("holder's calls after the heal", _counts(part["holder_calls_after_heal"]))
        )
        rows.append(("calls in flight at the cut", _counts(part["in_flight_at_cut"])))
        rows.append(
            (
                "writers recovered after the heal",
                f"{part['recovered']} of {part['count']} "
                f"(longest {part['longest_recovery_ms']:.0f} ms to the next success)",
            )
        )
    resets = figures.get("resets")
    if resets:
        rows.append(
            (
                "connection resets",
                f"{resets['with_connections']} resets of {resets['actions']} tries, "
                f"{resets['connections_reset']} connections",
            )
        )
    degrades = figures.get("degrades")
    if degrades:
        rows.append(
            (
                "slow links",
                f"{degrades['count']}: {'; '.join(degrades['what'])}; "
                f"{degrades['packets_passed']} packets passed, "
                f"{degrades['packets_dropped']} dropped",
            )
        )
    server = figures.get("server")
    if server:
        rows.append(
            (
                "server kills / restarts",
                f"{server['kills']} / {server['restarts']} (outages {server['outage_ms']} ms, "
                f"{server['processes_killed']} server processes SIGKILLed)",
            )
        )
        rows.append(
            (
                "during the outages",
                f"{server['unknown_outcomes_during_outages']} calls got StoreUnavailableError; "
                f"{server['writers_that_carried_on']} of {server['writers_across_a_restart']} "
                "writers alive across a restart succeeded again",
            )
        )
    unknown = figures["unknown_outcomes"]
    rows.append(
        (
            "unknown outcomes logged",
            f"{unknown['logged']} (longest call {unknown['longest_ms']:.0f} ms)",
        )
    )
    rows.append(("acknowledged writes lost", str(figures["lost_acknowledged_writes"])))
    return rows


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} x{n}" for kind, n in sorted(counts.items())) or "none"
