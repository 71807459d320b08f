"""The ``langgraph`` suite: the savers over the store at the URL (G clauses).

``rulvar check URL --suite langgraph`` (and ``--suite all`` when the
``langgraph`` extra is installed) runs, over fresh locations of the backend:

- the ownership checks (``langgraph_ownership``: superseded holders, zombies,
  concurrent invocations, deletes, subgraphs, flat reads, reclaimed space);
- the surface checks (``_langgraph_surfaces``: list filters, special and
  ordered pending writes, a refused put's meta, every layout deleted, a lost
  hold's renewer);
- the write-order checks (``langgraph_orders``: pending writes before their
  checkpoint, adversarial and concurrent orders, real graphs under
  ``durability="async"``, a hold's memory, stock savers' string versions);
- ``lg-langgraph-conformance``: LangGraph's own checkpointer conformance suite
  (``langgraph-checkpoint-conformance``) on ``AsyncRulvarSaver`` (G12);
- ``lg-storm``: writer processes storm one thread through the saver under
  SIGSTOP and SIGKILL, and the final chain holds no superseded write (G2).

More checks join through ``CHECK_SOURCES``: each names a module whose
``CHECKS`` has rows ``(id, title, clauses, body(locations))``, as the
ownership suite's do. A module that is not there (another branch's, not yet
merged) is skipped. Without the extra, the suite is one row saying why.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    build_check,
    not_run,
)
from rulvar_store.backend import LocationFactory

__all__ = ["CHECK_SOURCES", "SPEC", "langgraph_available", "langgraph_conformance"]

CHECK_SOURCES: Final = (
    "rulvar_conformance.suites.langgraph_ownership",
    # The write orders LangGraph's background puts may take (G15, G16, G18).
    "rulvar_conformance.suites.langgraph_orders",
)


def langgraph_available() -> str | None:
    """``None`` when the ``langgraph`` extra is installed, else why not."""
    if importlib.util.find_spec("langgraph") is None:
        return "the 'langgraph' extra is not installed (pip install 'rulvar-stores[langgraph]')"
    return None


Row = tuple[str, str, tuple[str, ...], Callable[[LocationFactory], None]]


def _sourced(module_name: str) -> tuple[Row, ...]:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return ()  # a hook for a module of another branch, not merged yet
        raise
    # A module whose own rows take more than the locations offers KIT_CHECKS.
    rows: tuple[Row, ...] = getattr(module, "KIT_CHECKS", module.CHECKS)
    return rows


def langgraph_conformance(certification: Certification) -> ConformanceSuite:
    """Every LangGraph check over the certification's fresh locations."""
    missing = langgraph_available()
    if missing is not None:
        reason = missing

        def unavailable() -> None:
            not_run(reason)

        return ConformanceSuite(
            "langgraph",
            (
                build_check(
                    "lg-extra-installed", "the langgraph extra", ("G12",), unavailable
                ),
            ),
        )
    from rulvar_conformance.suites._langgraph_runs import conformance_check, storm_check
    from rulvar_conformance.suites._langgraph_surfaces import SURFACE_CHECKS
    from rulvar_langgraph import RulvarSaver

    locations = certification.locations
    checks: list[ConformanceCheck] = []
    for module_name in CHECK_SOURCES:
        for check_id, title, clauses, body in _sourced(module_name):
            checks.append(
                build_check(check_id, title, clauses, partial(body, locations))
            )
    checks += [
        build_check(check_id, title, clauses, partial(body, locations, RulvarSaver))
        for check_id, title, clauses, body in SURFACE_CHECKS
    ]
    checks += [conformance_check(locations), storm_check(locations)]
    return ConformanceSuite("langgraph", tuple(checks))


SPEC: Final = SuiteSpec(
    "langgraph",
    langgraph_conformance,
    "leases",
    False,
    "LangGraph savers over the store: ownership, surfaces, LangGraph's own "
    "conformance suite, a storm of writer processes (G) [langgraph extra]",
)
