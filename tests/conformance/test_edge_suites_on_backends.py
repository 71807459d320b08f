"""The honest stores pass every check of the edge suites, through their registry entry.

``stale-surfaces``, ``lease-lifetime`` and ``data-edges`` run exactly as
``rulvar check`` runs them (``Backend.certify`` -> ``certification_suites`` ->
``run_suites``) on memory, SQLite and PostgreSQL: no check may fail, and none may
be reported not run, since each of these locations offers a second handle, a
clock and the transcript twin. The PostgreSQL case needs RULVAR_TEST_POSTGRES_URL
(skipped locally without it, failed under CI=true).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification, certification_suites, run_suites
from rulvar_store.backend import parse_store_url, resolve_backend
from tests._postgres_gate import postgres_url as _postgres_url

EDGE_SUITES: Final = ("stale-surfaces", "lease-lifetime", "data-edges")


def _certify(url: str) -> None:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        suites = certification_suites(
            Certification(locations, backend.capabilities), EDGE_SUITES
        )
        assert [suite.name for suite in suites] == list(EDGE_SUITES)
        results = run_suites(suites)
    assert [r.error for r in results if r.status != "passed"] == []
    assert len(results) == sum(len(suite.checks) for suite in suites)


@pytest.mark.clause("C4")
def test_memory_passes_the_edge_suites() -> None:
    """memory:// passes every stale-surfaces, lease-lifetime and data-edges check."""
    _certify("memory://")


@pytest.mark.clause("C4")
def test_sqlite_passes_the_edge_suites(tmp_path: Path) -> None:
    """sqlite:// (a scratch file per location) passes every edge-suite check."""
    _certify(f"sqlite:///{tmp_path / 'certify.db'}")


@pytest.mark.clause("C4")
@pytest.mark.postgres
def test_postgres_passes_the_edge_suites() -> None:
    """postgresql:// (a fresh schema per location) passes every edge-suite check."""
    _certify(_postgres_url())
