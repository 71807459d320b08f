"""The test functions ``rulvar_conformance.pytest_plugin`` collects when asked.

One function per suite, parametrized by check id and marked with the check's
clauses, so an item reads ``rulvar-conformance::test_leasable[fencing-stale-epoch]``.
The store comes from the ``rulvar_certification`` fixture of the plugin.
Never collected on its own: the name does not match ``test_*.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

from rulvar_conformance.certify import (
    SUITE_CAPABILITIES,
    Certification,
    certification_suites,
)
from rulvar_store import OpenedStore

if TYPE_CHECKING:
    from _pytest.mark.structures import ParameterSet

__all__ = [
    "test_fenced_transcripts",
    "test_fenced_writes",
    "test_journal",
    "test_leasable",
]


def _never_opened(ttl_ms: int | None) -> OpenedStore:
    raise AssertionError("template suites only list their checks")


_ALL_CAPABILITIES: Final = frozenset(
    capability for capability in SUITE_CAPABILITIES.values() if capability is not None
)
_TEMPLATES: Final = {
    suite.name: suite
    for suite in certification_suites(_never_opened, _ALL_CAPABILITIES)
}


def _params(suite_name: str) -> list[ParameterSet]:
    return [
        pytest.param(
            check.id,
            id=check.id,
            marks=[pytest.mark.clause(clause) for clause in check.clauses],
        )
        for check in _TEMPLATES[suite_name].checks
    ]


def _run(
    suite_name: str,
    check_id: str,
    certification: Certification,
) -> None:
    __tracebackhide__ = True
    fresh, capabilities, expiry_ttl_ms = certification
    needed = SUITE_CAPABILITIES[suite_name]
    if needed is not None and needed not in capabilities:
        pytest.skip(f"the store does not declare the {needed!r} capability")
    suites = {
        suite.name: suite
        for suite in certification_suites(
            fresh, capabilities, expiry_ttl_ms=expiry_ttl_ms
        )
    }
    suites[suite_name].check(check_id).run()


@pytest.mark.parametrize("check_id", _params("journal"))
def test_journal(check_id: str, rulvar_certification: Certification) -> None:
    """Journal and meta obligations (CONTRACT 8.2)."""
    _run("journal", check_id, rulvar_certification)


@pytest.mark.parametrize("check_id", _params("leasable"))
def test_leasable(check_id: str, rulvar_certification: Certification) -> None:
    """Lease, epoch and fence obligations (CONTRACT 8.3)."""
    _run("leasable", check_id, rulvar_certification)


@pytest.mark.parametrize("check_id", _params("fenced-writes"))
def test_fenced_writes(check_id: str, rulvar_certification: Certification) -> None:
    """Fenced meta writes and deletes (CONTRACT 8.5)."""
    _run("fenced-writes", check_id, rulvar_certification)


@pytest.mark.parametrize("check_id", _params("fenced-transcripts"))
def test_fenced_transcripts(check_id: str, rulvar_certification: Certification) -> None:
    """The fenced transcript twin (CONTRACT 8.6)."""
    _run("fenced-transcripts", check_id, rulvar_certification)
