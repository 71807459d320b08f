"""Every built-in backend passes its full default certification (C4 positive control).

Runs exactly what ``rulvar check URL`` runs (``Backend.certify`` yielding a
``LocationFactory``, every default suite the backend's capabilities call for)
for memory, file, SQLite and PostgreSQL: no check may fail, and every check
reported as not run must be explained by an ability the backend's locations do
not offer (or by a store that never calls failpoints), never by anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import certification_suites, run_suites
from rulvar_conformance.harness.certification import by_url
from rulvar_conformance.harness.failpause import hits_of
from rulvar_conformance.harness.site import FEATURE_REASONS
from rulvar_store import LeasableStore
from rulvar_store.backend import (
    LOCATION_FEATURES,
    LocationFactory,
    parse_store_url,
    resolve_backend,
)
from tests._postgres_gate import postgres_url as _postgres_url

NO_FAILPOINTS: Final = "never calls rulvar_store.backend.hit"


def _calls_failpoints(locations: LocationFactory) -> bool:
    location = locations()
    try:
        with location.open() as opened:
            journal = opened.journal
            if not isinstance(journal, LeasableStore):
                return False
            lease = journal.acquire("probe", "prober")
            hits, _ = hits_of(lambda: journal.append("probe", {"seq": 1}, lease))
            return bool(hits)
    finally:
        location.remove()


GATED: tuple[str, ...] = (
    # Checks of a promise only some backends make (issue 40): a TCP link to stall,
    # a SQLite file to replace, lease times on the server's clock, a pool option,
    # several event loops on one handle (the asyncio path only), a durability setting.
    "declares no TCP route",
    "not a SQLite file location",
    "lease_clock = 'server'",
    "takes no pool_max_size option",
    "no pool option to set",
    "reports no durability setting",
    "offers no queued puts",
)


def _certify(url: str, *, lacking: tuple[str, ...] = ()) -> None:
    """Certify ``url``: no failure, and every not-run explained by what it lacks.

    ``lacking`` names reasons beyond location abilities that the backend's stores
    legitimately give (an optional surface they do not have).
    """
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        sample = locations()
        missing = set(LOCATION_FEATURES) - sample.features
        sample.remove()
        failpoints = _calls_failpoints(locations)
        # As `rulvar check URL` does: the URL-options checks open URLs of their own.
        results = run_suites(certification_suites(by_url(locations, parsed, backend)))
    failed = [f"{r.check_id}: {r.error}" for r in results if r.status == "failed"]
    assert failed == []
    explanations = [FEATURE_REASONS[name] for name in missing] + list(lacking)
    explanations += GATED
    if not failpoints:
        explanations.append(NO_FAILPOINTS)
    unexplained = [
        f"{r.check_id}: {r.error}"
        for r in results
        if r.status == "not-run"
        and not any(reason in (r.error or "") for reason in explanations)
    ]
    assert unexplained == []
    if not missing and failpoints:
        assert [
            r.check_id
            for r in results
            if r.status == "not-run" and not any(g in (r.error or "") for g in GATED)
        ] == []


@pytest.mark.clause("C4")
def test_memory_backend_passes_every_default_check() -> None:
    """memory:// passes; its not-run checks lack contention or failpoints, nothing else."""
    _certify("memory://")


@pytest.mark.clause("C4")
def test_file_backend_passes_every_default_check(tmp_path: Path) -> None:
    """file:// (journal and meta lookup only) passes every check it is given."""
    # T7 is about a journal's transcripts() twin; the file journal has none.
    # The argument rules for owners and ttls need leases; the file store has none (T8).
    _certify(
        f"file://{tmp_path / 'store'}",
        lacking=("no transcripts() twin", "the store has no leases"),
    )


@pytest.mark.clause("C4")
def test_sqlite_backend_passes_every_default_check_and_runs_them_all(
    tmp_path: Path,
) -> None:
    """sqlite:// locations offer every ability and call failpoints: all checks run."""
    _certify(f"sqlite:///{tmp_path / 'check.db'}")


@pytest.mark.postgres
@pytest.mark.clause("C4")
def test_postgres_backend_passes_every_default_check_and_runs_them_all() -> None:
    """postgresql:// passes with every check run (fresh schemas, dropped after)."""
    _certify(_postgres_url())
