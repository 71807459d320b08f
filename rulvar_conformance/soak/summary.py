"""The soak's typed summary: counts, health, outcome, and the lines a person reads.

``SoakActivity`` holds every count the tally keeps as a named field, so a
misspelt count fails at type-check time (and at run time, in ``from_counts``)
instead of reading as zero. ``SoakSummary`` is computed once, when the storm has
been judged; it owns the rows ``rulvar soak`` prints, the verdict lines and the
JSON written to ``summary.json``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from rulvar_conformance.soak.violations import Violation, grouped, plural

if TYPE_CHECKING:
    from rulvar_conformance.soak.tally import SoakQuorum

__all__ = [
    "InsidePauses",
    "Outcome",
    "ResumeLatency",
    "SoakActivity",
    "SoakHealth",
    "SoakSummary",
    "TakeoverLatency",
]

Outcome = Literal["passed", "violations", "quorum-not-reached"]

_PROGRESS: Final = (
    ("takeovers", "takeovers", "takeovers"),
    ("stale refused", "stale_rejects", "stale_probes"),
    ("pauses", "pauses", "pauses"),
    ("kills", "kills", "kills"),
    ("accepted", "accepted", ""),
)
"""Progress parts: label, activity count, the quorum field that is its goal."""


@dataclass(frozen=True)
class SoakActivity:
    """What the storm did, counted from the writers' and the runner's records."""

    processes: int = 0
    epochs: int = 0
    takeovers: int = 0
    stale_probes: int = 0
    stale_rejects: int = 0
    stale_accepts: int = 0
    accepted: int = 0
    appends: int = 0
    meta: int = 0
    blob_puts: int = 0
    blob_deletes: int = 0
    holder_deletes: int = 0
    victims: int = 0
    live_cross_rejects: int = 0
    busy_retries: int = 0
    stalls: int = 0
    releases: int = 0
    fence_kicks: int = 0
    unknown_logged: int = 0
    errors: int = 0
    fatals: int = 0
    pauses: int = 0
    pauses_inside_call: int = 0
    pauses_in_transaction: int = 0
    kills: int = 0
    kills_inside_call: int = 0
    companion_runs: int = 0
    companion_appends: int = 0

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> SoakActivity:
        """The record of ``counts``; a name that is no field raises ``TypeError``."""
        return cls(**counts)

    def progress_line(self, elapsed_s: float, quorum: SoakQuorum) -> str:
        """One carriage-return line: each count beside its quorum where it has one."""
        parts = []
        for label, name, goal_name in _PROGRESS:
            goal = getattr(quorum, goal_name) if goal_name else 0
            parts.append(
                f"{label} {getattr(self, name)}" + (f"/{goal}" if goal else "")
            )
        return f"\r  {elapsed_s:6.1f} s  " + "  ".join(parts) + "   "


@dataclass(frozen=True)
class ResumeLatency:
    """From each SIGCONT to the paused writer's next outcome (ms)."""

    count: int = 0
    paused_while_booting: int = 0
    mean: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class TakeoverLatency:
    """How long a run a killed writer held stayed out of reach (ms), per such run.

    ``mean``/``max``: from the SIGKILL to another writer's grant. Writers pick
    runs at random, so that mostly measures when someone next asked. What the
    dead holder cost is the wait from the first ask after the kill to the grant
    (``ask_mean``/``ask_max``) and the asks refused in between (``refused``):
    with crash-fast takeover (L11) the first ask is granted (0 refused, the
    wait one acquire call); without it the asks are refused until the ttl runs
    out.
    """

    count: int = 0
    mean: float | None = None
    max: float | None = None
    ask_mean: float | None = None
    ask_max: float | None = None
    refused: int = 0


@dataclass(frozen=True)
class InsidePauses:
    """Pauses that landed inside a store call, and how many froze every writer."""

    count: int = 0
    before_others_wrote: int = 0
    blocked_everyone: int = 0
    longest_blocked_ms: float = 0.0
    calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class SoakHealth:
    """Liveness figures: reported, never asserted (a loaded machine stretches them)."""

    first_write_ms: float | None = None
    accepted_per_writer: Mapping[str, int] | None = None
    least_served: int = 0
    mean_served: float = 0.0
    busy_retries: int = 0
    busy_per_writer: Mapping[str, int] | None = None
    longest_write_drought_ms: float = 0.0
    drought_cause: str = ""
    resume_to_next_outcome_ms: ResumeLatency = ResumeLatency()
    kill_to_takeover_ms: TakeoverLatency = TakeoverLatency()
    pauses_inside_a_call: InsidePauses = InsidePauses()


@dataclass(frozen=True)
class SoakSummary:
    """One soak's verdict and figures, computed once after the storm was judged."""

    settings: Mapping[str, Any]
    activity: SoakActivity
    health: SoakHealth
    storm_ms: float
    journal_entries: int
    violations: tuple[Violation, ...]
    quorum_missing: tuple[str, ...]
    unknown: tuple[Mapping[str, Any], ...]
    faults: Mapping[str, Any] = field(default_factory=dict)
    """What a fault layer did (``rulvar_conformance.faults``); empty without one."""

    @property
    def outcome(self) -> Outcome:
        """Violations first: a store caught misbehaving failed, quorum or not."""
        if self.violations:
            return "violations"
        if self.quorum_missing:
            return "quorum-not-reached"
        return "passed"

    @property
    def cap_s(self) -> float:
        return float(self.settings.get("seconds", 0.0))

    def rows(self, wall_s: float) -> list[tuple[str, str]]:
        """The label and value of every line ``rulvar soak`` prints after the storm."""
        a, h = self.activity, self.health
        resolved = Counter(f"{call['op']}: {call['resolved']}" for call in self.unknown)
        resume = h.resume_to_next_outcome_ms
        return [
            ("writer processes", f"{a.processes} (respawns included)"),
            ("lease grants / takeovers", f"{a.epochs} / {a.takeovers}"),
            ("stale probes refused", f"{a.stale_rejects} of {a.stale_probes}"),
            (
                "SIGSTOP pauses",
                f"{a.pauses} ({a.pauses_inside_call} inside a store call, "
                f"{a.pauses_in_transaction} inside its write transaction)",
            ),
            (
                "SIGKILL + respawn",
                f"{a.kills} ({a.kills_inside_call} inside a store call)",
            ),
            (
                "unknown outcomes",
                f"{len(self.unknown)}: "
                + (", ".join(f"{k} x{v}" for k, v in resolved.items()) or "none"),
            ),
            (
                "accepted writes",
                f"{a.accepted} (appends {a.appends}, meta {a.meta}, blob puts "
                f"{a.blob_puts}, blob deletes {a.blob_deletes}, run deletes "
                f"{a.holder_deletes})",
            ),
            (
                "victims / live cross-run refusals",
                f"{a.victims} / {a.live_cross_rejects}",
            ),
            ("stalls past the ttl / releases", f"{a.stalls} / {a.releases}"),
            ("busy retries", str(h.busy_retries)),
            (
                "least served writer / mean",
                f"{h.least_served} / {h.mean_served} accepted",
            ),
            (
                "longest write drought",
                f"{h.longest_write_drought_ms:.0f} ms: {h.drought_cause}",
            ),
            ("pauses that froze every writer", _froze(h.pauses_inside_a_call)),
            (
                "SIGCONT to next outcome",
                f"mean {_ms(resume.mean)} ms, max {_ms(resume.max)} ms "
                f"({resume.paused_while_booting} paused while booting, not counted)",
            ),
            (
                "SIGKILL to takeover of its runs",
                _takeovers(h.kill_to_takeover_ms),
            ),
            (
                "first write after the spawn",
                f"{(h.first_write_ms or 0) / 1000:.1f} s (boot)",
            ),
            (
                "companion appends / runs",
                f"{a.companion_appends} / {a.companion_runs} "
                "(threads sharing each writer's handle)",
            ),
            *(
                (f"fault: {label}", value)
                for label, value in self.faults.get("rows", ())
            ),
            ("journal entries at the end", str(self.journal_entries)),
            ("storm / wall time", f"{self.storm_ms / 1000:.1f} s / {wall_s:.1f} s"),
            ("violations", str(len(self.violations))),
        ]

    def verdict_lines(self) -> list[str]:
        """What the soak concluded: grouped violations, or the missing quorum, or none."""
        lines: list[str] = []
        if self.violations:
            groups = grouped(self.violations)
            lines.append(
                f"store-conformance multi-process-soak: "
                f"{plural(len(self.violations), 'violation')} "
                f"({plural(len(groups), 'kind')} by kind and surface)"
            )
            for group in groups:
                lines.append(f"- {group.title}")
                if group.meaning:
                    lines.append(f"  {group.meaning}")
                lines.extend(f"    e.g. {example}" for example in group.examples)
                if group.count > len(group.examples):
                    lines.append(
                        f"    ... and {group.count - len(group.examples)} more"
                    )
        if self.quorum_missing:
            lines.append(self.quorum_line())
        if not lines:
            lines.append("no violations")
        return lines

    def quorum_line(self) -> str:
        return (
            f"QUORUM NOT REACHED: the soak stopped at its {self.cap_s:g} s cap before "
            f"it had done enough to judge the store (still missing "
            f"{', '.join(self.quorum_missing)}); no violation was seen in what ran. "
            "Give it more time with --seconds, or fewer writers on a loaded machine."
        )

    def to_json(self, wall_s: float | None = None) -> dict[str, Any]:
        """The JSON-safe summary written to ``summary.json`` and ``--json``."""
        resolved = Counter(f"{call['op']}: {call['resolved']}" for call in self.unknown)
        data: dict[str, Any] = {
            "settings": dict(self.settings),
            "outcome": self.outcome,
            "passed": self.outcome == "passed",
            "violations": [item.line for item in self.violations],
            "violation_groups": [
                {
                    "kind": group.kind,
                    "surface": group.surface,
                    "count": group.count,
                    "examples": list(group.examples),
                }
                for group in grouped(self.violations)
            ],
            "quorum_missing": list(self.quorum_missing),
            "storm_ms": round(self.storm_ms, 1),
            "journal_entries": self.journal_entries,
            "activity": asdict(self.activity),
            "unknown_outcomes": {
                "count": len(self.unknown),
                "resolved": dict(resolved),
                "calls": [dict(call) for call in self.unknown],
            },
            "health": asdict(self.health),
        }
        if self.faults:
            data["faults"] = {k: v for k, v in self.faults.items() if k != "rows"}
        if wall_s is not None:
            data["wall_s"] = round(wall_s, 1)
        return data


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value}"


def _takeovers(latency: TakeoverLatency) -> str:
    if latency.count == 0:
        return "no killed writer held a run another writer then took"
    return (
        f"first ask after the kill to grant: mean {_ms(latency.ask_mean)} ms, max "
        f"{_ms(latency.ask_max)} ms, {latency.refused} asks refused in between "
        f"(kill to grant: mean {_ms(latency.mean)} ms, max {_ms(latency.max)} ms; "
        f"{latency.count} runs held at a kill)"
    )


def _froze(row: InsidePauses) -> str:
    """Pauses inside a call during which no other writer wrote anything."""
    if not row.count:
        return "none of 0 pauses inside a call"
    return (
        f"{row.blocked_everyone} of {row.count} pauses inside a call "
        f"(longest {row.longest_blocked_ms:.0f} ms)"
    )
