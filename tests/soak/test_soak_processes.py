"""The multi-process soak with real writer processes, pauses and kills (S7-S10).

The quick profile runs once per backend: through ``rulvar soak`` for SQLite (the
CLI, its report folder and its picture) and through ``run_multi_process_soak``
for PostgreSQL. A soak against SQLite stores with a seeded fencing defect must
report violations: a soak that cannot fail proves nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance.harness.async_certify import async_locations
from rulvar_conformance.harness.async_facade import AsyncFacadeOpener
from rulvar_conformance.soak import (
    DEFAULT_SOAK_QUORUM,
    ChaosPlan,
    SoakFailure,
    SoakQuorum,
    run_multi_process_soak,
)
from rulvar_conformance.soak.profiles import SoakProfile, profile_named
from rulvar_conformance.soak.runner import SoakResult
from rulvar_conformance.soak.summary import SoakActivity
from rulvar_store import ConfigError, MemoryStore, OpenedStore
from rulvar_store.backend import (
    LocationFactory,
    LocationOpener,
    StoreLocation,
    locations_from_factory,
)
from tests.soak.seeded_defects import DEFECTS, DefectiveOpener

pytestmark = pytest.mark.soak


def _quorum_met(activity: SoakActivity, quorum: SoakQuorum) -> None:
    assert quorum.missing(activity) == []
    assert activity.stale_probes == activity.stale_rejects


def _soaked(location: StoreLocation, profile: SoakProfile) -> SoakResult:
    """``run_multi_process_soak`` of ``location`` at ``profile``'s sizes."""
    return run_multi_process_soak(
        location,
        writers=profile.writers,
        seconds=profile.seconds,
        seed=profile.seed,
        ttl_ms=profile.ttl_ms,
        runs=profile.runs,
        chaos=profile.chaos,
        quorum=profile.quorum,
        companions=profile.companions,
    )


@pytest.mark.clause("S7")
@pytest.mark.clause("S8")
@pytest.mark.clause("S10")
def test_rulvar_soak_quick_on_sqlite_passes_and_writes_a_report(tmp_path: Path) -> None:
    """Honest SQLite under the quick profile: exit 0, quorum met, summary, logs and picture."""
    report = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rulvar_cli",
            "soak",
            f"sqlite:///{tmp_path / 'runs.db'}",
            "--profile",
            "quick",
            "--report",
            str(report),
            "--json",
            str(tmp_path / "summary.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no violations" in done.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["violations"] == []
    _quorum_met(SoakActivity(**summary["activity"]), profile_named("quick").quorum)
    # Companion threads shared every writer's handle, and each was held to its log.
    assert summary["settings"]["companions"] == profile_named("quick").companions
    assert summary["activity"]["companion_appends"] > 0
    assert (report / "tenures.png").stat().st_size > 10_000
    # One log per writer incarnation that lived past its boot: one SIGKILLed while
    # importing never opened its log, and a log no spawn explains is an old soak's.
    chaos = [
        json.loads(line) for line in (report / "chaos.jsonl").read_text().splitlines()
    ]
    spawned = {f"w{e['w']}.{e['inc']}" for e in chaos if e["t"] == "spawn"}
    killed = {f"w{e['w']}.{e['inc']}" for e in chaos if e["t"] == "kill"}
    logs = {path.stem for path in (report / "logs").glob("*.jsonl")}
    assert len(spawned) == summary["activity"]["processes"]
    assert spawned - killed <= logs <= spawned
    assert not (tmp_path / "runs.db").exists(), (
        "the soak must never touch the URL's own file"
    )


@pytest.mark.postgres
@pytest.mark.clause("S7")
@pytest.mark.clause("S8")
@pytest.mark.clause("S10")
def test_quick_soak_on_postgres_has_no_violations(
    postgres_locations: LocationFactory,
) -> None:
    """Honest PostgreSQL under the quick profile: quorum met, zero violations."""
    profile = profile_named("quick")
    result = _soaked(postgres_locations(), profile)
    assert result.violations == ()
    assert result.summary.outcome == "passed"
    _quorum_met(result.activity, profile.quorum)
    assert result.journal_entries >= 1
    assert result.activity.companion_appends > 0


ASYNC_SOAK: Final = SoakProfile(
    name="async-test",
    writers=3,
    seconds=90.0,
    ttl_ms=250,
    runs=("soak-run-0", "soak-run-1"),
    chaos=ChaosPlan(pauses=2, kills=2, interval_ms=1000),
    quorum=SoakQuorum(
        takeovers=20, stale_probes=300, holder_deletes=1, pauses=2, kills=2
    ),
    seed=5,
)
"""A small bounded profile: every S8 count and some chaos, well under the cap."""


@pytest.mark.clause("S7")
@pytest.mark.clause("S8")
@pytest.mark.clause("Y5")
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_soak_through_the_asyncio_api_has_no_violations(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Writer processes awaiting AsyncSqliteStore / AsyncPostgresStore: quorum, no violation.

    Each writer opens its location through ``open_store_async`` behind the kit's
    facade (``rulvar soak URL --async``), so its writes, its companions' writes
    and the stale probes all go through the native async store, paused and
    killed like sync writers.
    """
    fresh: LocationFactory = request.getfixturevalue(f"{backend}_locations")
    location = async_locations(fresh)()
    assert isinstance(location.opener, AsyncFacadeOpener)
    try:
        result = _soaked(location, ASYNC_SOAK)
    finally:
        location.remove()
    assert result.violations == ()
    assert result.summary.outcome == "passed"
    _quorum_met(result.activity, ASYNC_SOAK.quorum)
    assert result.activity.companion_appends > 0


# A stale probe gets past a store that fences only a batch's first operation
# only when it joins a batch a companion's append leads: 1 to 4 probes in 100
# with 2 companions on a busy machine, and a soak at the default quorum can end
# after 100 probes (once, in a full-suite run, none joined). With 4 companions
# and 400 stale rejects required, 3-5 in 100 joined in every trial under load.
# Per defect: (companions, stale rejects before the soak may end).
BATCHING: Final = {"fence-first-of-batch": (4, 400)}

DEFECT_CASES: Final = [
    *(pytest.param(defect, False, id=defect) for defect in DEFECTS),
    # The asyncio soak is not blind either: its writers await the same defect.
    pytest.param(
        "expired-lease-accepted",
        True,
        id="expired-lease-accepted-async",
        marks=pytest.mark.clause("Y5"),
    ),
]


@pytest.mark.clause("C4")
@pytest.mark.parametrize(("defect", "through_async"), DEFECT_CASES)
def test_a_soak_over_a_seeded_defect_reports_violations(
    tmp_path: Path, defect: str, through_async: bool
) -> None:
    """Real writer processes over a SQLite store with one fencing defect: SoakFailure, STALE ACCEPT."""
    path = str(tmp_path / "defect.db")
    opener: LocationOpener = DefectiveOpener(path, defect)
    if through_async:
        opener = AsyncFacadeOpener(opener)
    location = StoreLocation(name=f"{path} ({defect})", opener=opener)
    companions, stale_rejects = BATCHING.get(
        defect, (2, DEFAULT_SOAK_QUORUM.stale_rejects)
    )
    with pytest.raises(SoakFailure) as caught:
        run_multi_process_soak(
            location,
            writers=3,
            seconds=60,
            seed=2,
            ttl_ms=200,
            chaos=ChaosPlan(pauses=1, kills=1, interval_ms=1000),
            quorum=SoakQuorum(pauses=1, kills=1, stale_rejects=stale_rejects),
            companions=companions,
        )
    text = str(caught.value)
    assert text.startswith("store-conformance multi-process-soak: ")
    assert "STALE ACCEPT" in text
    assert caught.value.result.violations


@pytest.mark.clause("S12")
def test_a_location_that_cannot_go_to_a_child_is_refused() -> None:
    """An in-process memory location (processes=False) cannot be soaked: ConfigError."""

    def fresh(ttl_ms: int | None) -> OpenedStore:
        store = MemoryStore()
        return OpenedStore(journal=store, transcripts=store.transcripts())

    with pytest.raises(ConfigError, match="cannot be soaked"):
        run_multi_process_soak(locations_from_factory(fresh)())
