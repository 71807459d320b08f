"""The test functions ``rulvar_conformance.pytest_plugin`` collects when asked.

One function per registered suite (``test_<suite>``, dashes as underscores),
parametrized by check id and marked with the check's clauses, so an item reads
``rulvar-conformance::test_leasable[fencing-stale-epoch]``. The locations come
from the ``rulvar_certification`` fixture of the plugin. Never collected on its
own: the name does not match ``test_*.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import pytest

from rulvar_conformance.harness.certify import (
    Certification,
    SuiteSpec,
    certification_suites,
    suite_specs,
)
from rulvar_conformance.harness.deadline import (
    DEFAULT_CHECK_TIMEOUT_S,
    run_with_deadline,
)
from rulvar_conformance.harness.explain import explain_failure
from rulvar_conformance.harness.kit import (
    CheckNotRun,
    ConformanceFailure,
    ConformanceSuite,
)
from rulvar_store.backend import StoreLocation

if TYPE_CHECKING:
    from _pytest.mark.structures import ParameterSet

__all__: list[str] = []  # filled below, one name per registered suite


def _never_opened() -> StoreLocation:
    raise AssertionError("template suites only list their checks")


def _template(spec: SuiteSpec) -> ConformanceSuite:
    capabilities = frozenset({spec.capability} if spec.capability else ())
    return spec.build(Certification(_never_opened, capabilities))


def _params(suite: ConformanceSuite) -> list[ParameterSet]:
    return [
        pytest.param(
            check.id,
            id=check.id,
            marks=[pytest.mark.clause(clause) for clause in check.clauses],
        )
        for check in suite.checks
    ]


def _run(spec: SuiteSpec, check_id: str, certification: Certification) -> None:
    __tracebackhide__ = True
    if (
        spec.capability is not None
        and spec.capability not in certification.capabilities
    ):
        pytest.skip(f"the store does not declare the {spec.capability!r} capability")
    (suite,) = certification_suites(certification, [spec.name])
    check = suite.check(check_id)
    failure: ConformanceFailure | None = None
    try:
        # The same deadline as ``rulvar check``: a hung store fails its test.
        run_with_deadline(check_id, check.run, DEFAULT_CHECK_TIMEOUT_S)
    except CheckNotRun as exc:
        pytest.skip(f"not run: {exc.reason}")
    except ConformanceFailure as exc:
        failure = exc
    if failure is not None:
        # What ``rulvar check`` prints under a failing row (the clause texts
        # included), once: raised outside the ``except``, so pytest shows no
        # chain of the kit's own exceptions repeating it. The store is at fault.
        lines = explain_failure(check.title, check.clauses, failure.detail)
        pytest.fail(f"store-conformance {check_id}: " + "\n".join(lines), pytrace=False)


def _test_function(spec: SuiteSpec) -> Callable[..., None]:
    @pytest.mark.rulvar_suite(spec.name)
    @pytest.mark.parametrize("check_id", _params(_template(spec)))
    def test(check_id: str, rulvar_certification: Certification) -> None:
        _run(spec, check_id, rulvar_certification)

    test.__doc__ = spec.description or f"the {spec.name} suite"
    return test


_FUNCTIONS: Final[dict[str, Any]] = {
    "test_" + spec.name.replace("-", "_"): _test_function(spec)
    for spec in suite_specs()
}
globals().update(_FUNCTIONS)
__all__ += sorted(_FUNCTIONS)
