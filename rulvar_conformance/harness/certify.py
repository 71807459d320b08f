"""Certification: every suite a backend's capabilities call for, run to the end.

``rulvar check`` and the pytest plugin both build their checks here from one
registry of suites (``rulvar_conformance.suites``): every suite is built from
one ``Certification`` (``harness.certification``). ``run_suites`` runs the
checks without stopping at the first failure and reports one ``CheckResult``
per check: passed, failed, or not run with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rulvar_conformance.harness.certification import (
    CERTIFY_EXPIRY_TTL_MS,
    CERTIFY_TTL_MS,
    Certification,
    SuiteSpec,
)
from rulvar_conformance.harness.deadline import (
    DEFAULT_CHECK_TIMEOUT_S,
    DEFAULT_RUN_TIMEOUT_S,
    RunBudget,
    stuck_threads,
)
from rulvar_conformance.harness.kit import CheckNotRun, ConformanceSuite
from rulvar_conformance.suites import registered_specs
from rulvar_store import LeasableStore, has_fenced_writes, has_meta_lookup
from rulvar_store.backend import LocationFactory, has_single_writer_files

__all__ = [
    "ALL_SUITES",
    "CERTIFY_EXPIRY_TTL_MS",
    "CERTIFY_TTL_MS",
    "DEFAULT_CHECK_TIMEOUT_S",
    "DEFAULT_RUN_TIMEOUT_S",
    "Certification",
    "CheckResult",
    "CheckStatus",
    "RunBudget",
    "SuiteSpec",
    "certification_suites",
    "named_but_not_declared",
    "probe_capabilities",
    "run_suites",
    "stuck_threads",
    "suite_specs",
]

ALL_SUITES: Final = "all"
"""The selection that names every registered suite, default or not."""


def suite_specs() -> tuple[SuiteSpec, ...]:
    """Every registered suite, in the order certification runs them."""
    return registered_specs()


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
        if _declared(spec, certification)
    ]


def _declared(spec: SuiteSpec, certification: Certification) -> bool:
    """Whether the backend declares what ``spec`` checks (a suite may need nothing)."""
    return spec.capability is None or spec.capability in certification.capabilities


def named_but_not_declared(
    certification: Certification, selection: Iterable[str]
) -> list[tuple[str, str]]:
    """Suites named in ``selection`` (not ``"all"``) that the certification leaves out.

    Each as ``(suite, capability)``: the capability the backend does not declare,
    so that a user who asked for the suite by name is told why nothing ran.
    """
    names = set(selection) - {ALL_SUITES}
    return [
        (spec.name, spec.capability)
        for spec in suite_specs()
        if spec.name in names
        and spec.capability is not None
        and not _declared(spec, certification)
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
            if has_single_writer_files(opened.journal):
                found.add("single_writer_files")
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
    note: str | None = None
    """What the check did (faults injected, what survived), when it says."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def run_suites(
    suites: Iterable[ConformanceSuite],
    on_result: Callable[[CheckResult], None] | None = None,
    *,
    check_timeout_s: float = DEFAULT_CHECK_TIMEOUT_S,
    budget: RunBudget | None = None,
) -> list[CheckResult]:
    """Run every check of every suite in order, never stopping at a failure.

    ``on_result`` is called after each check (progress output). A check still
    running after ``check_timeout_s`` fails as "did not finish" with the stuck
    threads' stacks, and the next check starts (``_deadline``). ``budget``
    bounds the run as a whole (K10): a caller running checks one call at a time
    passes the same one to every call; without it, this call has its own.
    """
    if budget is None:
        budget = RunBudget(check_timeout_s)
    results: list[CheckResult] = []
    for suite in suites:
        for check in suite.checks:
            started = time.perf_counter()
            status: CheckStatus = "failed"
            error: str | None = None
            try:
                budget.run(check.id, check.run)
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
                note=None if check.note is None else check.note(),
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results
