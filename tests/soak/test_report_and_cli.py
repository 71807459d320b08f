"""The soak's report folder and the ``rulvar soak`` command's refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_conformance.soak.report import INSTALL_HINT, write_report
from rulvar_conformance.soak.runner import SoakResult
from rulvar_conformance.soak.summary import SoakActivity, SoakHealth, SoakSummary
from tests.soak.test_referee import storm_in_process


def _result() -> SoakResult:
    store, events = storm_in_process(broken=False, writers=2, seconds=0.3)
    chaos = [{"t": "spawn", "w": w, "inc": 0, "ns": events[0]["ns"]} for w in (0, 1)]
    summary = SoakSummary(
        settings={"seconds": 1.0},
        activity=SoakActivity(epochs=1),
        health=SoakHealth(),
        storm_ms=300.0,
        journal_entries=len(store.load("soak-run-0")),
        violations=(),
        quorum_missing=(),
        unknown=(),
    )
    return SoakResult(summary=summary, events=events, chaos=chaos)


def test_the_report_holds_a_summary_and_a_picture(tmp_path: Path) -> None:
    """summary.json, chaos.jsonl and a non-trivial tenures.png."""
    summary = write_report(_result(), tmp_path)
    assert summary["picture"] == "tenures.png"
    assert json.loads((tmp_path / "summary.json").read_text())["passed"] is True
    assert (tmp_path / "tenures.png").stat().st_size > 10_000
    assert (tmp_path / "chaos.jsonl").read_text().count("\n") == 2


def test_the_report_adds_up_the_writers_store_counters(tmp_path: Path) -> None:
    """Each finished writer reports its store's stats(); the summary adds them up."""
    result = _result()
    done = [event for event in result.events if event["t"] == "done"]
    summary = write_report(result, tmp_path)
    figures = json.loads((tmp_path / "summary.json").read_text())["store_stats"]
    assert figures == summary["store_stats"]
    assert figures["incarnations_reporting"] == len(done) == 2
    assert figures["calls"] > 0
    assert figures["leases_acquired"] > 0


def test_without_matplotlib_the_report_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON is still written and names the extra to install."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    summary = write_report(_result(), tmp_path)
    assert INSTALL_HINT in summary["picture"]
    assert "rulvar-stores[report]" in INSTALL_HINT
    assert not (tmp_path / "tenures.png").exists()
    assert (tmp_path / "summary.json").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memory://", "cannot be soaked"),
        ("file:///tmp/rulvar-soak-refused", "cannot be soaked"),
    ],
)
def test_rulvar_soak_refuses_stores_it_cannot_soak(url: str, message: str) -> None:
    """In-process memory (no child processes) and unfenced file stores: exit 2, one line."""
    done = subprocess.run(
        [sys.executable, "-m", "rulvar_cli", "soak", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
