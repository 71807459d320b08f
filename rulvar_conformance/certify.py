"""Certification: every suite a backend's capabilities call for, run to the end.

``rulvar check`` and the pytest plugin both build their checks here:
``certification_suites`` wires the suites to a backend's ``FreshStoreFactory``
(CONTRACT 8.1, C2 wiring) and ``run_suites`` runs all of them without stopping at
the first failure, reporting one ``CheckResult`` per check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, cast

from rulvar_conformance._kit import ConformanceSuite
from rulvar_conformance.fenced_transcripts import (
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
)
from rulvar_conformance.fenced_writes import fenced_writes_conformance
from rulvar_conformance.journal import journal_store_conformance
from rulvar_conformance.leasable import ExpiryPairing, leasable_store_conformance
from rulvar_store import (
    FreshStoreFactory,
    JournalStore,
    LeasableStore,
    OpenedStore,
    TranscriptStore,
    has_fenced_writes,
    has_meta_lookup,
)

__all__ = [
    "CERTIFY_EXPIRY_TTL_MS",
    "CERTIFY_TTL_MS",
    "SUITE_CAPABILITIES",
    "Certification",
    "CheckResult",
    "certification_suites",
    "probe_capabilities",
    "run_suites",
]

CERTIFY_TTL_MS: Final = 600_000
"""ttl of the stores the mandatory checks use: no stall can expire a lease."""

CERTIFY_EXPIRY_TTL_MS: Final = 600
"""ttl of the stores the wall-clock expiry check uses."""

SUITE_CAPABILITIES: Final[dict[str, str | None]] = {
    "journal": None,
    "leasable": "leases",
    "fenced-writes": "fenced_writes",
    "fenced-transcripts": "fenced_transcripts",
}
"""Each suite and the backend capability that calls for it (``None``: always)."""


class _OpenedJournal:
    """The journal of an ``OpenedStore`` whose ``close`` closes everything opened.

    The kit closes what ``mk`` returns; closing only the journal would leak what
    the backend opened next to it (a twin, a temp directory, a schema).
    """

    def __init__(self, opened: OpenedStore) -> None:
        self._opened = opened
        self._closed = False

    @property
    def paired_transcripts(self) -> TranscriptStore:
        """The transcript store opened together with this journal."""
        return self._opened.transcripts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._opened.journal, name)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._opened.close()


def _journal_factory(fresh: FreshStoreFactory, ttl_ms: int | None) -> Callable[[], Any]:
    return lambda: _OpenedJournal(fresh(ttl_ms))


class Certification(NamedTuple):
    """What a certification runs against: fresh stores, their capabilities, expiry ttl."""

    fresh: FreshStoreFactory
    capabilities: frozenset[str]
    expiry_ttl_ms: int = CERTIFY_EXPIRY_TTL_MS


def certification_suites(
    fresh: FreshStoreFactory,
    capabilities: frozenset[str],
    *,
    expiry_ttl_ms: int = CERTIFY_EXPIRY_TTL_MS,
) -> list[ConformanceSuite]:
    """Build the suites ``capabilities`` call for, over stores from ``fresh``.

    Always the journal suite; the leasable suite (ttl 600 000, expiry pairing at
    ``expiry_ttl_ms``, default 600 ms) with ``"leases"``; the fenced suites with ``"fenced_writes"`` and
    ``"fenced_transcripts"``. Every ``OpenedStore`` a check opens is closed by it.
    """
    journal_mk = cast(Callable[[], JournalStore], _journal_factory(fresh, None))
    leased_mk = cast(
        Callable[[], LeasableStore], _journal_factory(fresh, CERTIFY_TTL_MS)
    )
    suites = [journal_store_conformance(journal_mk)]
    if "leases" in capabilities:
        short_mk = cast(
            Callable[[], LeasableStore], _journal_factory(fresh, expiry_ttl_ms)
        )
        suites.append(
            leasable_store_conformance(
                leased_mk, expiry=ExpiryPairing(expiry_ttl_ms, short_mk)
            )
        )
    if "fenced_writes" in capabilities:
        suites.append(fenced_writes_conformance(leased_mk))
    if "fenced_transcripts" in capabilities:

        def pair() -> FencedTranscriptsFixture:
            journal = _OpenedJournal(fresh(CERTIFY_TTL_MS))
            return FencedTranscriptsFixture(
                journal=cast(LeasableStore, journal),
                transcripts=journal.paired_transcripts,
            )

        suites.append(fenced_transcripts_conformance(pair))
    return suites


def probe_capabilities(fresh: FreshStoreFactory) -> frozenset[str]:
    """Read the capabilities a store declares, from one fresh store (closed again).

    ``leases`` when the journal has acquire/renew/release, ``meta_lookup`` when it
    has ``get_meta``, the fenced ones from the declared markers (F5: a marker is a
    promise the certification then checks).
    """
    with fresh(None) as opened:
        found = set()
        if isinstance(opened.journal, LeasableStore):
            found.add("leases")
        if has_meta_lookup(opened.journal):
            found.add("meta_lookup")
        if has_fenced_writes(opened.journal):
            found.add("fenced_writes")
        if has_fenced_writes(opened.transcripts):
            found.add("fenced_transcripts")
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check: ``error`` is the failure text, ``None`` on a pass."""

    suite: str
    check_id: str
    passed: bool
    duration_ms: float
    error: str | None
    title: str = ""
    clauses: tuple[str, ...] = ()


def run_suites(
    suites: Iterable[ConformanceSuite],
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run every check of every suite in order, never stopping at a failure.

    ``on_result`` is called after each check (progress output). A failing check's
    ``error`` is its ``ConformanceFailure`` text, ``store-conformance <id>: ...``.
    """
    results: list[CheckResult] = []
    for suite in suites:
        for check in suite.checks:
            started = time.perf_counter()
            error: str | None = None
            try:
                check.run()
            except AssertionError as exc:
                error = (
                    str(exc) or f"store-conformance {check.id}: {type(exc).__name__}"
                )
            except Exception as exc:
                error = f"store-conformance {check.id}: unexpected {type(exc).__name__}: {exc}"
            result = CheckResult(
                suite=suite.name,
                check_id=check.id,
                passed=error is None,
                duration_ms=(time.perf_counter() - started) * 1000,
                error=error,
                title=check.title,
                clauses=check.clauses,
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results
