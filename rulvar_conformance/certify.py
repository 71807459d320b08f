"""Certification: every suite a backend's capabilities call for, run to the end.

``rulvar check`` and the pytest plugin both build their checks here from one
registry of suites (``suite_specs``). A ``Certification`` names where the stores
live: a ``LocationFactory`` of fresh isolated locations (CONTRACT 8.1; a location
can be opened again, in this process or a spawned child), the backend's
declared capabilities and the short ttl of the wall-clock expiry check.
``run_suites`` runs the checks without stopping at the first failure and reports
one ``CheckResult`` per check: passed, failed, or not run with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, cast

from rulvar_conformance._deadline import (
    DEFAULT_CHECK_TIMEOUT_S,
    run_with_deadline,
    stuck_threads,
)
from rulvar_conformance._kit import CheckNotRun, ConformanceSuite
from rulvar_conformance.data_edges import data_edges_conformance
from rulvar_conformance.fenced_transcripts import (
    FencedTranscriptsFixture,
    fenced_transcripts_conformance,
)
from rulvar_conformance.fenced_writes import fenced_writes_conformance
from rulvar_conformance.journal import journal_store_conformance
from rulvar_conformance.leasable import ExpiryPairing, leasable_store_conformance
from rulvar_conformance.lease_lifetime import lease_lifetime_conformance
from rulvar_conformance.stale_surfaces import stale_surfaces_conformance
from rulvar_store import (
    JournalStore,
    LeasableStore,
    OpenedStore,
    TranscriptStore,
    has_fenced_writes,
    has_meta_lookup,
)
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = [
    "ALL_SUITES",
    "CERTIFY_EXPIRY_TTL_MS",
    "CERTIFY_TTL_MS",
    "DEFAULT_CHECK_TIMEOUT_S",
    "Certification",
    "CheckResult",
    "CheckStatus",
    "SuiteSpec",
    "certification_suites",
    "probe_capabilities",
    "run_suites",
    "stuck_threads",
    "suite_specs",
]

CERTIFY_TTL_MS: Final = 600_000
"""ttl of the stores the mandatory checks use: no stall can expire a lease."""

CERTIFY_EXPIRY_TTL_MS: Final = 600
"""ttl of the stores the wall-clock expiry check uses."""

ALL_SUITES: Final = "all"
"""The selection that names every registered suite, default or not."""


class Certification(NamedTuple):
    """What a certification runs against: fresh locations, capabilities, expiry ttl."""

    locations: LocationFactory
    capabilities: frozenset[str]
    expiry_ttl_ms: int = CERTIFY_EXPIRY_TTL_MS


@dataclass(frozen=True)
class SuiteSpec:
    """One registered suite: how to build it, what calls for it, whether it is default.

    Attributes:
        name: the suite name ``--suite`` selects and reports show.
        build: builds the suite for a certification (must not open anything).
        capability: the backend capability that calls for it (``None``: always).
        default: part of a plain ``rulvar check``; others run when selected.
        description: one line for listings.
    """

    name: str
    build: Callable[[Certification], ConformanceSuite]
    capability: str | None = None
    default: bool = True
    description: str = ""


class _OpenedJournal:
    """The journal of a store opened at its own fresh location.

    ``close`` closes everything the opener opened (a twin, a pool) and then
    removes the location, so checks built on plain ``mk`` factories leave
    nothing behind.
    """

    def __init__(self, location: StoreLocation, ttl_ms: int | None) -> None:
        self._location = location
        self._opened: OpenedStore = location.open(ttl_ms)
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
            try:
                self._opened.close()
            finally:
                self._location.remove()


def store_factory(locations: LocationFactory, ttl_ms: int | None) -> Callable[[], Any]:
    """A ``mk`` for the classic suites: each call opens a store at a fresh location."""
    return lambda: _OpenedJournal(locations(), ttl_ms)


def _journal_suite(certification: Certification) -> ConformanceSuite:
    mk = cast(Callable[[], JournalStore], store_factory(certification.locations, None))
    return journal_store_conformance(mk)


def _leasable_suite(certification: Certification) -> ConformanceSuite:
    locations, _, expiry_ttl_ms = certification
    leased = cast(Callable[[], LeasableStore], store_factory(locations, CERTIFY_TTL_MS))
    short = cast(Callable[[], LeasableStore], store_factory(locations, expiry_ttl_ms))
    return leasable_store_conformance(
        leased, expiry=ExpiryPairing(expiry_ttl_ms, short)
    )


def _fenced_writes_suite(certification: Certification) -> ConformanceSuite:
    leased = store_factory(certification.locations, CERTIFY_TTL_MS)
    return fenced_writes_conformance(cast(Callable[[], LeasableStore], leased))


def _fenced_transcripts_suite(certification: Certification) -> ConformanceSuite:
    def pair() -> FencedTranscriptsFixture:
        journal = _OpenedJournal(certification.locations(), CERTIFY_TTL_MS)
        return FencedTranscriptsFixture(
            journal=cast(LeasableStore, journal),
            transcripts=journal.paired_transcripts,
        )

    return fenced_transcripts_conformance(pair)


def _kill_points_suite(certification: Certification) -> ConformanceSuite:
    # Imported here: the kill points pull in the worker and driver modules.
    from rulvar_conformance.kill_points.suite import kill_point_conformance

    return kill_point_conformance(certification.locations, certification.capabilities)


def _two_handles_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.two_handles import two_handles_conformance

    return two_handles_conformance(certification.locations, certification.capabilities)


def _forced_races_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.forced_races import forced_races_conformance

    return forced_races_conformance(certification.locations, certification.capabilities)


def _thread_races_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.thread_races import thread_races_conformance

    return thread_races_conformance(certification.locations, certification.capabilities)


def _shared_handle_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.shared_handle import shared_handle_conformance

    return shared_handle_conformance(
        certification.locations, certification.capabilities
    )


def _next_op_sees_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.next_op_sees import next_op_sees_conformance

    return next_op_sees_conformance(certification.locations)


def _incremental_reads_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.incremental_reads import incremental_reads_conformance

    return incremental_reads_conformance(certification.locations)


def _operator_tools_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.operator_tools import operator_tools_conformance

    return operator_tools_conformance(certification.locations)


def _durability_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.durability import durability_conformance

    return durability_conformance(certification.locations)


def _typed_errors_suite(certification: Certification) -> ConformanceSuite:
    from rulvar_conformance.typed_errors import typed_errors_conformance

    return typed_errors_conformance(certification.locations, certification.capabilities)


def suite_specs() -> tuple[SuiteSpec, ...]:
    """Every registered suite, in the order certification runs them."""
    return (
        SuiteSpec("journal", _journal_suite, None, True, "journal and meta (8.2)"),
        SuiteSpec("leasable", _leasable_suite, "leases", True, "leases, epochs (8.3)"),
        SuiteSpec(
            "fenced-writes",
            _fenced_writes_suite,
            "fenced_writes",
            True,
            "fenced meta writes and deletes (8.5)",
        ),
        SuiteSpec(
            "fenced-transcripts",
            _fenced_transcripts_suite,
            "fenced_transcripts",
            True,
            "the fenced blob twin (8.6)",
        ),
        SuiteSpec(
            "two-handles",
            _two_handles_suite,
            "leases",
            True,
            "two handles on one location: exclusivity, epochs, takeover, X1, X2, X7",
        ),
        SuiteSpec(
            "forced-races",
            _forced_races_suite,
            "leases",
            True,
            "failpoint-forced check-then-act windows on every fenced surface (X3)",
        ),
        SuiteSpec(
            "thread-races",
            _thread_races_suite,
            "leases",
            True,
            "real threads race a takeover against leased writes on every surface",
        ),
        SuiteSpec(
            "shared-handle",
            _shared_handle_suite,
            "leases",
            True,
            "threads of ONE handle (batched or not): own outcomes, takeover races",
        ),
        SuiteSpec(
            "typed-errors",
            _typed_errors_suite,
            "leases",
            True,
            "contention surfaces as the retryable StoreBusyError (Q5)",
        ),
        SuiteSpec(
            "stale-surfaces",
            lambda c: stale_surfaces_conformance(c.locations),
            "leases",
            True,
            "a dead lease of every kind on every surface (L6, F2, F6, J7)",
        ),
        SuiteSpec(
            "lease-lifetime",
            lambda c: lease_lifetime_conformance(c.locations),
            "leases",
            True,
            "expiry boundary, renew from now, ttl, delete frees (L1, L8, L9, M6)",
        ),
        SuiteSpec(
            "data-edges",
            lambda c: data_edges_conformance(c.locations),
            None,
            True,
            "seq edges, paging, big payloads, snapshots, filters, refs (D2-D7, T4)",
        ),
        SuiteSpec(
            "next-op-sees",
            _next_op_sees_suite,
            "leases",
            True,
            "a release, delete or takeover, by a batch-mate too, is seen next (X9)",
        ),
        SuiteSpec(
            "incremental-reads",
            _incremental_reads_suite,
            None,
            True,
            "load_since while others append and across delete/re-creation (X10)",
        ),
        SuiteSpec(
            "operator-tools",
            _operator_tools_suite,
            "fenced_transcripts",
            True,
            "audit, sweeps, prune and delete_run over the store (A2, R1-R4)",
        ),
        SuiteSpec(
            "durability",
            _durability_suite,
            None,
            False,
            "acknowledged writes survive SIGKILL; the declared durability runs (X8)",
        ),
        SuiteSpec(
            "kill-points",
            _kill_points_suite,
            None,
            False,
            "SIGKILL around run writes and inside store transactions (9)",
        ),
    )


def _selected(
    specs: Sequence[SuiteSpec], selection: Iterable[str] | None
) -> list[SuiteSpec]:
    if selection is None:
        return [spec for spec in specs if spec.default]
    names = set(selection)
    if ALL_SUITES in names:
        return list(specs)
    known = {spec.name for spec in specs}
    unknown = sorted(names - known)
    if unknown:
        raise KeyError(
            f"no suite named {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return [spec for spec in specs if spec.name in names]


def certification_suites(
    certification: Certification, selection: Iterable[str] | None = None
) -> list[ConformanceSuite]:
    """Build the suites the certification's capabilities call for.

    ``selection`` names suites (``"all"`` for every one); ``None`` means the
    default set. A selected suite whose capability the backend does not declare
    is left out (its promise was never made).

    Raises:
        KeyError: ``selection`` names an unknown suite.
    """
    return [
        spec.build(certification)
        for spec in _selected(suite_specs(), selection)
        if spec.capability is None or spec.capability in certification.capabilities
    ]


def probe_capabilities(locations: LocationFactory) -> frozenset[str]:
    """Read the capabilities a store declares, from one fresh store (then removed).

    ``leases`` when the journal has acquire/renew/release, ``meta_lookup`` when it
    has ``get_meta``, the fenced ones from the declared markers (F5: a marker is a
    promise the certification then checks).
    """
    location = locations()
    try:
        with location.open() as opened:
            found = set()
            if isinstance(opened.journal, LeasableStore):
                found.add("leases")
            if has_meta_lookup(opened.journal):
                found.add("meta_lookup")
            if has_fenced_writes(opened.journal):
                found.add("fenced_writes")
            if has_fenced_writes(opened.transcripts):
                found.add("fenced_transcripts")
    finally:
        location.remove()
    return frozenset(found)


CheckStatus = Literal["passed", "failed", "not-run"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check.

    ``error`` is the failure text (``store-conformance <id>: ...``) or, for a
    check that could not run, the reason; ``None`` on a pass.
    """

    suite: str
    check_id: str
    status: CheckStatus
    duration_ms: float
    error: str | None
    title: str = ""
    clauses: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def run_suites(
    suites: Iterable[ConformanceSuite],
    on_result: Callable[[CheckResult], None] | None = None,
    *,
    check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
) -> list[CheckResult]:
    """Run every check of every suite in order, never stopping at a failure.

    ``on_result`` is called after each check (progress output). A check still
    running after ``check_timeout_s`` fails as "did not finish" with the stuck
    threads' stacks, and the next check starts (``_deadline``).
    """
    results: list[CheckResult] = []
    for suite in suites:
        for check in suite.checks:
            started = time.perf_counter()
            status: CheckStatus = "failed"
            error: str | None = None
            try:
                run_with_deadline(check.id, check.run, check_timeout_s)
                status = "passed"
            except CheckNotRun as exc:
                status, error = "not-run", exc.reason
            except AssertionError as exc:
                error = (
                    str(exc) or f"store-conformance {check.id}: {type(exc).__name__}"
                )
            except Exception as exc:
                error = f"store-conformance {check.id}: unexpected {type(exc).__name__}: {exc}"
            result = CheckResult(
                suite=suite.name,
                check_id=check.id,
                status=status,
                duration_ms=(time.perf_counter() - started) * 1000,
                error=error,
                title=check.title,
                clauses=check.clauses,
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results
