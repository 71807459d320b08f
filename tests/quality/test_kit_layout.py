"""The kit's layout: suites and harness apart, one suite signature, one process starter.

- Every registered suite is a module of ``rulvar_conformance.suites`` with a
  ``SPEC`` whose ``build`` takes one ``Certification`` and opens nothing.
- Only ``rulvar_conformance/harness/processes.py`` starts child processes
  (``subprocess.Popen``, ``multiprocess``): one answer to "how does the kit
  start a child".
- The suites never import the CLI, and the harness never imports a suite
  module except through the registry (``rulvar_conformance.suites``).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import Certification
from rulvar_conformance.harness.certify import suite_specs
from rulvar_conformance.suites import REGISTERED
from rulvar_store.backend import StoreLocation

KIT: Final = Path(__file__).resolve().parents[2] / "rulvar_conformance"
STARTER: Final = KIT / "harness" / "processes.py"
# harness module -> the suite module it may import, and why.
HARNESS_SUITE_IMPORTS: Final = {
    # The asyncio certification adds the suites only it runs (cancellation, loop health).
    "async_certify.py": {
        "rulvar_conformance.suites.cancellation",
        "rulvar_conformance.suites.loop_health",
    },
}


def _never_opened() -> StoreLocation:
    raise AssertionError("building a suite must not open a location")


def test_every_registered_suite_builds_from_one_certification() -> None:
    """One signature: ``build(certification)``; building opens nothing."""
    specs = suite_specs()
    assert [spec.name.replace("-", "_") for spec in specs] == list(REGISTERED)
    certification = Certification(
        _never_opened,
        frozenset({"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}),
    )
    for spec in specs:
        parameters = list(inspect.signature(spec.build).parameters.values())
        assert len(parameters) == 1, spec.name
        suite = spec.build(certification)
        assert suite.checks, spec.name


def _starts_a_child(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else None
            name = func.id if isinstance(func, ast.Name) else name
            if name in ("Popen", "run", "call", "check_call", "check_output"):
                owner = func.value if isinstance(func, ast.Attribute) else None
                if name == "Popen" or (
                    isinstance(owner, ast.Name) and owner.id == "subprocess"
                ):
                    found.append(f"line {node.lineno}: {name}(...)")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names]
            module = getattr(node, "module", None) or ""
            if "multiprocess" in names or module.startswith("multiprocess"):
                found.append(f"line {node.lineno}: imports multiprocess")
            if module == "subprocess" and "Popen" in names:
                found.append(f"line {node.lineno}: imports Popen")
    return found


@pytest.mark.parametrize(
    "path",
    sorted(p for p in KIT.rglob("*.py") if p != STARTER),
    ids=lambda p: str(p.relative_to(KIT)),
)
def test_only_the_process_module_starts_children(path: Path) -> None:
    """Every child process of the kit is started by harness/processes.py."""
    tree = ast.parse(path.read_text(), filename=str(path))
    assert _starts_a_child(tree) == []


def test_the_process_module_is_seen_starting_children() -> None:
    """The scan above can fail: it finds the starts in the one module allowed them."""
    tree = ast.parse(STARTER.read_text(), filename=str(STARTER))
    assert len(_starts_a_child(tree)) >= 2


def _imports(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


@pytest.mark.parametrize(
    "path",
    sorted((KIT / "harness").glob("*.py")),
    ids=lambda p: p.name,
)
def test_the_harness_reaches_suites_only_through_the_registry(path: Path) -> None:
    """Suites depend on the harness, not the other way round (bar the registry)."""
    reached = {
        module
        for module in _imports(path)
        if module.startswith("rulvar_conformance.suites.")
    }
    assert reached == HARNESS_SUITE_IMPORTS.get(path.name, set())


BACKEND_FAMILIES: Final = ("Q", "P")
"""SQLite's and PostgreSQL's own clauses: a third-party store can meet none of them."""

BACKEND_GATED: Final = frozenset(
    {
        # Not run unless the store declares the promise the clause states: a
        # SQLite database file behind the location, lease_clock = "server", a
        # URL that takes pool_max_size, a PostgreSQL URL. Every other store gets
        # them as not run.
        "replaced-file/file-replaced-every-write",
        # A blob store offering queue_put (SQLite, PostgreSQL): Q19's queue.
        "queued-writes/queued-rides-next-put",
        "queued-writes/queued-keeps-order",
        "queued-writes/queued-flush-lands-now",
        "queued-writes/queued-awaited-is-landed",
        "queued-writes/queued-superseded-refused",
        "server-clock/lease-times-on-server-clock",
        "pool-fairness/pool-serves-waiting-callers",
        "pool-fairness/pool-serves-waiting-coroutines",
        # A PostgreSQL URL: the forgetting proxy speaks its wire protocol.
        "forgotten-statements/store-reprepares-forgotten",
        "forgotten-statements/async-store-reprepares-forgotten",
    }
)


def test_generic_checks_cite_generic_clauses_only() -> None:
    """A check every backend runs cites no backend's clause (those live in its tests)."""
    from rulvar_conformance.clauses import clause_family

    every = frozenset({"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"})
    certification = Certification(_never_opened, every)
    cited = {
        f"{spec.name}/{check.id}": clause
        for spec in suite_specs()
        for check in spec.build(certification).checks
        for clause in check.clauses
        if clause_family(clause) in BACKEND_FAMILIES
    }
    assert {check: c for check, c in cited.items() if check not in BACKEND_GATED} == {}
