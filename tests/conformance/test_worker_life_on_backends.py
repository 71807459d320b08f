"""The honest stores pass the worker-life suite through their registry entry (L11, L12).

Run as ``rulvar check`` runs it. SQLite and PostgreSQL locations open in
spawned children, so both checks run there; a memory domain does not cross
processes, so its takeover check is reported not run (and nothing else).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulvar_conformance import Certification, certification_suites, run_suites
from rulvar_store.backend import parse_store_url, resolve_backend
from tests._postgres_gate import postgres_url as _postgres_url


def _statuses(url: str) -> dict[str, str]:
    parsed = parse_store_url(url)
    backend = resolve_backend(parsed)
    assert backend.certify is not None
    with backend.certify(parsed) as locations:
        suites = certification_suites(
            Certification(locations, backend.capabilities), ["worker-life"]
        )
        results = run_suites(suites)
    assert [r.error for r in results if r.status == "failed"] == []
    return {r.check_id: r.status for r in results}


@pytest.mark.clause("L11")
@pytest.mark.clause("L12")
def test_sqlite_passes_the_worker_life_suite(tmp_path: Path) -> None:
    """sqlite:// takes a SIGKILLed child's lease over at once, not a stopped one's."""
    assert set(_statuses(f"sqlite:///{tmp_path / 'certify.db'}").values()) == {"passed"}


@pytest.mark.clause("L11")
@pytest.mark.clause("L12")
@pytest.mark.postgres
def test_postgres_passes_the_worker_life_suite() -> None:
    """postgresql:// judges a holder by its liveness session."""
    assert set(_statuses(_postgres_url()).values()) == {"passed"}


@pytest.mark.clause("L12")
def test_memory_passes_the_refusal_check() -> None:
    assert _statuses("memory://") == {
        "refusal-names-the-holder": "passed",
        "dead-holder-taken-over": "not-run",
    }
