"""The soak's report folder: a JSON summary, every log, and a picture of lease tenures.

``write_report`` always writes ``summary.json`` and ``chaos.jsonl`` beside the
writers' ``logs/``; the picture ``tenures.png`` needs matplotlib (the ``report``
extra). Without it the summary says so and ``plot_tenures`` raises ``ImportError``
with the install command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rulvar_conformance.soak.events import Event

if TYPE_CHECKING:
    from rulvar_conformance.soak.runner import SoakResult

__all__ = ["INSTALL_HINT", "plot_tenures", "write_report", "writers_store_stats"]

INSTALL_HINT: Final = (
    "pip install 'rulvar-stores[report]'  (or: pip install 'matplotlib>=3.8')"
)
_END_OF_TENURE: Final = frozenset({"released", "fence-kick", "stale-reject", "stall"})


def write_report(result: SoakResult, folder: Path) -> dict[str, Any]:
    """Write summary.json, chaos.jsonl and (with matplotlib) tenures.png into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "chaos.jsonl").open("w", encoding="utf-8") as handle:
        for event in result.chaos:
            handle.write(json.dumps(event) + "\n")
    summary = result.summary.to_json()
    summary["store_stats"] = writers_store_stats(result.events)
    try:
        plot_tenures(result.events, result.chaos, folder / "tenures.png")
        summary["picture"] = "tenures.png"
    except ImportError:
        summary["picture"] = f"not drawn: matplotlib is missing; {INSTALL_HINT}"
    except Exception as exc:  # a picture must never cost the soak its verdict
        summary["picture"] = f"not drawn: {exc!r}"
    (folder / "summary.json").write_text(
        json.dumps(summary, indent=2) + "\n", encoding="utf-8"
    )
    return summary


def writers_store_stats(events: list[Event]) -> dict[str, int]:
    """The store counters (``stats()``) of every writer incarnation that finished,
    added up, and how many did (a killed incarnation reports none)."""
    total: dict[str, int] = {"incarnations_reporting": 0}
    for event in events:
        figures = event.get("stats") if event.get("t") == "done" else None
        if not isinstance(figures, dict):
            continue
        total["incarnations_reporting"] += 1
        for name, value in figures.items():
            if isinstance(value, int):
                total[name] = total.get(name, 0) + value
    return total


def _tenures(records: list[Event]) -> list[dict[str, Any]]:
    """One bar per grant: from the grant to the holder's first end-of-tenure record.

    A tenure its holder never ended (killed, or stopped) ends at the incarnation's
    last record, which for a killed one is the runner's ``kill``.
    """
    bars: list[dict[str, Any]] = []
    open_bars: dict[tuple[int, int], dict[str, Any]] = {}
    last_seen: dict[tuple[int, int], int] = {}
    for event in sorted(records, key=lambda e: e.get("ns", 0)):
        key = (int(event.get("w", -1)), int(event.get("inc", 0)))
        last_seen[key] = int(event.get("ns", 0))
        kind = event.get("t")
        if kind == "grant":
            if key in open_bars:  # a tenure that ended without a record of its own
                open_bars.pop(key)["to"] = event["ns"]
            open_bars[key] = {
                "w": key[0],
                "run": event["run"],
                "epoch": event["epoch"],
                "from": event["ns"],
                "to": None,
                "stall": None,
            }
            bars.append(open_bars[key])
        elif key in open_bars and kind in _END_OF_TENURE:
            bar = open_bars.pop(key)
            bar["to"] = event["ns"]
            if kind == "stall":
                bar["stall"] = (
                    event["ns"],
                    event["ns"] + int(event.get("ms", 0)) * 1_000_000,
                )
        elif key in open_bars and kind == "accept" and event.get("surface") == "delete":
            open_bars.pop(key)["to"] = event["ns"]
    for key, bar in open_bars.items():
        bar["to"] = last_seen[key]
    return bars


def plot_tenures(events: list[Event], chaos: list[Event], path: Path) -> None:
    """Draw lease tenures per writer over time, with stalls, pauses, kills and stale rejects.

    Raises:
        ImportError: matplotlib is not installed (the message says how to install it).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise ImportError(f"the soak picture needs matplotlib: {INSTALL_HINT}") from exc
    everything = [*events, *chaos]
    if not everything:
        return
    origin = min(int(e.get("ns", 0)) for e in everything)

    def sec(ns: int) -> float:
        return (ns - origin) / 1e9

    bars = _tenures(everything)
    runs = sorted({bar["run"] for bar in bars})
    palette = plt.get_cmap("tab10")
    colour = {run: palette(i % 10) for i, run in enumerate(runs)}
    writers = sorted({int(e.get("w", 0)) for e in everything})
    fig, ax = plt.subplots(figsize=(14, 1.2 + 0.55 * len(writers)))
    for bar in bars:
        ax.broken_barh(
            [(sec(bar["from"]), max(sec(bar["to"]) - sec(bar["from"]), 0.002))],
            (bar["w"] - 0.3, 0.6),
            facecolors=colour[bar["run"]],
            alpha=0.85,
        )
        if bar["stall"]:
            s0, s1 = bar["stall"]
            ax.broken_barh(
                [(sec(s0), sec(s1) - sec(s0))],
                (bar["w"] - 0.3, 0.6),
                facecolors="none",
                edgecolors=colour[bar["run"]],
                hatch="////",
            )
    pause_open: dict[tuple[int, int], int] = {}
    for event in sorted(chaos, key=lambda e: e.get("ns", 0)):
        key = (int(event["w"]), int(event.get("inc", 0)))
        if event["t"] == "pause":
            pause_open[key] = int(event["ns"])
        elif event["t"] == "resume" and key in pause_open:
            start = pause_open.pop(key)
            ax.broken_barh(
                [(sec(start), sec(int(event["ns"])) - sec(start))],
                (key[0] - 0.45, 0.9),
                facecolors="0.55",
                alpha=0.35,
            )
        elif event["t"] == "kill":
            ax.plot(
                sec(int(event["ns"])),
                key[0],
                marker="X",
                color="red",
                markersize=9,
                zorder=5,
            )
    takeover_x: list[float] = []
    takeover_y: list[float] = []
    last_owner: dict[str, tuple[Any, Any]] = {}
    stale_x, stale_y = [], []
    for event in sorted(events, key=lambda e: e.get("ns", 0)):
        if event.get("t") == "grant":
            who = (event["w"], event.get("inc"))
            if last_owner.get(event["run"], who) != who:
                takeover_x.append(sec(event["ns"]))
                takeover_y.append(event["w"] + 0.38)
            last_owner[event["run"]] = who
        elif event.get("t") == "stale-reject":
            stale_x.append(sec(event["ns"]))
            stale_y.append(event["w"] - 0.38)
    ax.scatter(takeover_x, takeover_y, marker="v", s=14, color="black", zorder=4)
    ax.scatter(
        stale_x, stale_y, marker="|", s=10, color="darkgreen", linewidths=0.5, zorder=3
    )
    ax.set_yticks(writers, [f"w{w}" for w in writers])
    ax.set_ylim(min(writers) - 0.7, max(writers) + 0.7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first writer started")
    ax.set_title("Lease tenures per writer (bar = holding a run's lease, colour = run)")
    handles: list[Any] = [Patch(facecolor=colour[run], label=run) for run in runs]
    handles += [
        Patch(
            facecolor="white",
            edgecolor="black",
            hatch="////",
            label="stall past the ttl",
        ),
        Patch(facecolor="0.55", alpha=0.35, label="SIGSTOP pause"),
        Line2D(
            [], [], marker="X", color="red", linestyle="none", label="SIGKILL + respawn"
        ),
        Line2D(
            [],
            [],
            marker="v",
            color="black",
            linestyle="none",
            label="takeover (grant)",
        ),
        Line2D(
            [],
            [],
            marker="|",
            color="darkgreen",
            linestyle="none",
            label="stale write refused",
        ),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
