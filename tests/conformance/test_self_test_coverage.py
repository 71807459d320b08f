"""The meta-test (C4): every registered check has a self-test, every self-test a check.

A self-test module proves checks against deliberately broken stores and names the
check ids it proves in a module-level ``SELF_TESTED: frozenset[str]``. The modules
are every ``tests/conformance/selftests/test_*.py`` plus the original
``tests/conformance/test_kit_self_tests.py``. The check ids come from every suite
of the registry (``suite_specs()``), built over a certification that declares
every capability and opens nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest

from rulvar_conformance import Certification, ConformanceSuite, suite_specs
from rulvar_store.backend import CAPABILITIES, StoreLocation

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parents[1]
SELFTEST_DIR: Final = HERE / "selftests"
ORIGINAL_SELF_TESTS: Final = HERE / "test_kit_self_tests.py"
ORIGINAL_SUITES: Final = ("journal", "leasable", "fenced-writes", "fenced-transcripts")

KILL_POINT_SELF_TESTS: Final = ROOT / "tests" / "kill_points" / "test_broken_stores.py"
TABLE_SUITES: Final[dict[str, str]] = {
    # Suites whose checks are one table of alike rows, proven as a table: broken
    # stores fail rows of it, and the rows differ only in where the child dies.
    # A broken store per (operation, failpoint) row would test the harness, not
    # the kit. The scenario rows are proven in-process by the K9 self-tests.
    "kill-points": "tests/kill_points/test_broken_stores.py",
    # The fault suites' rows are one harness each over the real store, proven
    # row by row where a defect is realistic: power-loss-sqlite-full (synchronous
    # off, acknowledging before the commit), power-loss-file (a forgotten folder
    # or file fsync), disk-faults-sqlite and -file (a raw OSError leaking). The
    # NORMAL row shares the FULL row's harness; the read-only row is a probe.
    "power-loss": "tests/faults/test_power_loss.py",
    "disk-faults": "tests/faults/test_disk_faults.py",
}

ORIGINAL_CHECKS_WITHOUT_SELF_TEST: Final[frozenset[str]] = frozenset(
    # Each original check that no broken store fails yet, with the reason it is hard
    # to break realistically. Empty: every one of the 29 has a broken store, in
    # test_kit_self_tests.py or selftests/test_original_checks_selftests.py.
)


CHECKS_PROVEN_BY_THEIR_JUDGE: Final[dict[str, str]] = {
    # A check whose body is a storm of real processes: a seeded broken saver would
    # have to be shipped into every writer process. Its judge is proven instead,
    # on a seeded chain holding a superseded holder's checkpoint.
    "lg-storm": "tests/langgraph/test_storm.py::test_referee_finds_a_superseded_holders_checkpoint",
}


def _never_opened() -> StoreLocation:
    raise AssertionError("the meta-test only reads the check list")


def registered_checks() -> dict[str, str]:
    """Every check id of every registered suite -> its suite name."""
    capabilities = frozenset(CAPABILITIES) | {
        spec.capability for spec in suite_specs() if spec.capability is not None
    }
    certification = Certification(_never_opened, capabilities)
    registered = {
        check.id: spec.name
        for spec in suite_specs()
        for check in spec.build(certification).checks
    }
    for suite in _path_suites(certification):
        registered.update({check.id: suite.name for check in suite.checks})
    return registered


def _path_suites(certification: Certification) -> list[ConformanceSuite]:
    """Suites a certification path adds beside the registry (the asyncio path's)."""
    from rulvar_conformance.suites.loop_health import loop_health_conformance

    return [loop_health_conformance(certification)]


def self_test_modules() -> list[Path]:
    return [
        *sorted(SELFTEST_DIR.glob("test_*.py")),
        ORIGINAL_SELF_TESTS,
        KILL_POINT_SELF_TESTS,
        *(
            ROOT / module
            for suite, module in TABLE_SUITES.items()
            if suite != "kill-points"
        ),
    ]


def _import_by_path(path: Path) -> ModuleType:
    # Self-test modules import shared helpers as tests.conformance.selftests.*,
    # which needs the project root on sys.path (tests/ is no package).
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    name = f"rulvar_self_test_coverage_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def self_tested() -> dict[str, list[str]]:
    """Every self-tested check id -> the modules that prove it."""
    proven: dict[str, list[str]] = {}
    for path in self_test_modules():
        ids = getattr(_import_by_path(path), "SELF_TESTED", None)
        where = f"{path.relative_to(ROOT)} must define SELF_TESTED: frozenset[str]"
        assert isinstance(ids, frozenset), where
        assert all(isinstance(check_id, str) for check_id in ids), where
        for check_id in ids:
            proven.setdefault(check_id, []).append(path.name)
    return proven


@pytest.mark.clause("C4")
def test_every_registered_check_has_a_self_test() -> None:
    """No check of any registered suite lacks a broken store that fails it."""
    checks = registered_checks()
    untested = sorted(
        f"{checks[check_id]}/{check_id}"
        for check_id in set(checks)
        - set(self_tested())
        - ORIGINAL_CHECKS_WITHOUT_SELF_TEST
        - set(CHECKS_PROVEN_BY_THEIR_JUDGE)
        if checks[check_id] not in TABLE_SUITES
    )
    assert untested == [], f"checks without a self-test: {untested}"


@pytest.mark.clause("C4")
def test_every_table_suite_has_broken_stores_failing_its_rows() -> None:
    """A suite proven as a table still has broken stores that fail some of its rows."""
    checks = registered_checks()
    proven = self_tested()
    for suite, module in TABLE_SUITES.items():
        rows = {check_id for check_id, name in checks.items() if name == suite}
        assert rows, f"no registered suite {suite!r}"
        failing = {check_id for check_id in rows if check_id in proven}
        assert failing, f"{module} proves no row of the {suite!r} table"


@pytest.mark.clause("C4")
def test_every_self_tested_id_is_a_registered_check() -> None:
    """A SELF_TESTED id that no registered suite has is a typo or a removed check."""
    checks = registered_checks()
    unknown = {
        check_id: modules
        for check_id, modules in self_tested().items()
        if check_id not in checks
    }
    assert unknown == {}, f"self-tested ids that are no registered check: {unknown}"


@pytest.mark.clause("C4")
def test_exemptions_are_original_checks_still_without_a_self_test() -> None:
    """Only original checks may be exempt, and an exemption ends with its self-test."""
    checks = registered_checks()
    original = {
        check_id for check_id, suite in checks.items() if suite in ORIGINAL_SUITES
    }
    assert len(original) >= 29  # the checks of CONTRACT 8.2-8.6
    assert sorted(ORIGINAL_CHECKS_WITHOUT_SELF_TEST - original) == []
    assert sorted(ORIGINAL_CHECKS_WITHOUT_SELF_TEST & set(self_tested())) == []


def test_every_self_test_module_is_found() -> None:
    """The scan sees the selftests directory and the original self-test module."""
    names = [path.name for path in self_test_modules()]
    assert "test_kit_self_tests.py" in names
    assert len(names) >= 2
