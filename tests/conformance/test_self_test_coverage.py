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


# Issue 40's held-out classes, each blind spot it named -> the check that now
# sees it, the self-test module proving the check and the seeded broken store or
# saver there that fails it. docs/guides/certifying.md shows the same table.
# (class, blind spot, check id, self-test module, seeded mutant)
BLIND_SPOTS: Final[tuple[tuple[str, str, str, str, str], ...]] = (
    (
        "asyncio",
        "close drops queued writes, reports them done",
        "async-close-drains",
        "test_loop_health_selftests.py",
        "CloseAnswersQueuedDone",
    ),
    (
        "asyncio",
        "a batch wakes coroutines of several loops on one loop",
        "async-batch-many-loops",
        "test_loop_health_selftests.py",
        "one_loop_wake",
    ),
    (
        "asyncio",
        "a read run inline on the loop thread behind a write",
        "async-loop-stall",
        "test_loop_health_selftests.py",
        "InlineReadBehindWrite",
    ),
    (
        "asyncio",
        "the async incremental read after the run is deleted",
        "async-load-since-after-delete",
        "test_loop_health_selftests.py",
        "CountCursorSince",
    ),
    (
        "langgraph",
        "a thread's first run meta put outside the lease",
        "lg-refused-put-leaves-no-meta",
        "test_langgraph_selftests.py",
        "MetaOutsideLease",
    ),
    (
        "langgraph",
        "special-channel writes that do not replace",
        "lg-special-writes-replace",
        "test_langgraph_selftests.py",
        "SpecialWritesKeepFirst",
    ),
    (
        "langgraph",
        "pending writes in the wrong order",
        "lg-pending-writes-order",
        "test_langgraph_selftests.py",
        "OrderedByTaskId",
    ),
    (
        "langgraph",
        "list limits applied before the filter",
        "lg-list-filter-then-limit",
        "test_langgraph_selftests.py",
        "FilterAfterLimit",
    ),
    (
        "langgraph",
        "delete_thread leaves blobs of other layouts",
        "lg-delete-thread-every-layout",
        "test_langgraph_selftests.py",
        "CurrentLayoutDelete",
    ),
    (
        "langgraph",
        "a hold's renewer re-takes a lost thread",
        "lg-renewer-stops-when-lost",
        "test_langgraph_selftests.py",
        "RetakingHold",
    ),
    (
        "langgraph",
        "a hold's memory kept across holds",
        "lg-orders-hold-to-hold",
        "test_langgraph_orders_selftests.py",
        "KeptAcrossHolds",
    ),
    (
        "langgraph",
        "a hold's memory answering for the wrong checkpoint",
        "lg-orders-right-checkpoint",
        "test_langgraph_orders_selftests.py",
        "WrongCheckpoint",
    ),
    (
        "langgraph",
        "a hold's memory raced by concurrent async tasks",
        "lg-orders-concurrent",
        "test_langgraph_orders_selftests.py",
        "UnlockedAsync",
    ),
    (
        "postgresql",
        "the stalled-link deadline (now a default suite)",
        "renew-fails-over-stalled-link",
        "test_stalled_link_selftests.py",
        "_deadline",
    ),
    (
        "postgresql",
        "a pooled connection handed back past waiting callers",
        "pool-serves-waiting-callers",
        "test_pg_paths_selftests.py",
        "return_idle_past_waiters",
    ),
    (
        "postgresql",
        "prepared statements the server forgot (DEALLOCATE/DISCARD ALL)",
        "store-reprepares-forgotten",
        "test_pg_paths_selftests.py",
        "exchange_without_reprepare",
    ),
    (
        "postgresql",
        "the same through the asyncio store",
        "async-store-reprepares-forgotten",
        "test_pg_paths_selftests.py",
        "exchange_without_reprepare",
    ),
    (
        "postgresql",
        "a renewal on the client's clock",
        "lease-times-on-server-clock",
        "test_pg_paths_selftests.py",
        "ClientClockLeases",
    ),
    (
        "sqlite",
        "a file identity checked once, not on every write",
        "file-replaced-every-write",
        "test_replaced_file_selftests.py",
        "FileIdentityCheckedOnce",
    ),
    (
        "sqlite",
        "durability of blob-only batches (now default)",
        "blob-ack-survives-sigkill",
        "test_durability_and_staleness_selftests.py",
        "BlobBatchAcksBeforeCommit",
    ),
    (
        "sqlite",
        "durability of close() (now default)",
        "close-keeps-acknowledged",
        "test_durability_and_staleness_selftests.py",
        "CloseAnswersQueuedDone",
    ),
    (
        "earlier",
        "a PostgreSQL cursor that skips appends in flight",
        "load-since-in-flight-append",
        "test_pg_paths_selftests.py",
        "TableTopCursor",
    ),
    (
        "earlier",
        "lease times from the client's clock on PostgreSQL",
        "lease-times-on-server-clock",
        "test_pg_paths_selftests.py",
        "ClientClockLeases",
    ),
    (
        "earlier",
        "a file store trusting its cached tail",
        "files-tail-sees-other-handle",
        "test_file_machinery_selftests.py",
        "TrustsCachedTail",
    ),
    (
        "earlier",
        "a retention sweep deleting without its brief lease",
        "ops-sweep-deletes-under-its-lease",
        "test_ops_walks_selftests.py",
        "delete_without_lease",
    ),
    (
        "earlier",
        "an audit that takes a brief lease",
        "ops-audit-takes-no-lease",
        "test_ops_walks_selftests.py",
        "audit_under_brief_lease",
    ),
    (
        "earlier",
        "a listing pager that stops after its first page",
        "ops-listing-every-page",
        "test_ops_walks_selftests.py",
        "first_page_only",
    ),
)
# The kit run that did not end (a group-commit leader that never hands on) is a
# property of the run, not a check: K10's tests prove it on that seeded store.
NON_ENDING_RUN: Final = (
    "tests/conformance/test_check_deadline.py",
    "test_a_group_commit_that_never_hands_on_fails_checks_instead_of_hanging",
)
BLIND_SPOT_CLASSES: Final = frozenset(
    {"asyncio", "langgraph", "postgresql", "sqlite", "earlier"}
)


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


@pytest.mark.clause("C4")
@pytest.mark.clause("K11")
def test_every_named_blind_spot_has_a_check_and_a_seeded_mutant_failing_it() -> None:
    """Issue 40's classes: each blind spot's check is registered, self-tested by
    the module named, and that module seeds the named broken store or saver."""
    assert {row[0] for row in BLIND_SPOTS} == BLIND_SPOT_CLASSES
    checks, proven = registered_checks(), self_tested()
    langgraph = importlib.util.find_spec("langgraph") is not None
    wrong: list[str] = []
    for _, spot, check_id, module, mutant in BLIND_SPOTS:
        if check_id.startswith("lg-") and not langgraph:
            continue  # the LangGraph suites need the extra (CI installs it)
        if check_id not in checks:
            wrong.append(f"{spot}: {check_id} is no registered check")
        if module not in proven.get(check_id, []):
            wrong.append(f"{spot}: {module} does not self-test {check_id}")
        path = SELFTEST_DIR / module
        used = path.read_text() + "".join(
            helper.read_text() for helper in SELFTEST_DIR.glob("_broken_*.py")
        )
        if mutant not in used:
            wrong.append(f"{spot}: no self-test helper seeds {mutant}")
    test_file, test_name = NON_ENDING_RUN
    if f"def {test_name}(" not in (ROOT / test_file).read_text():
        wrong.append(f"the non-ending run: {test_file}::{test_name} is gone")
    assert wrong == [], wrong


@pytest.mark.clause("K11")
def test_the_guide_shows_every_blind_spot_row() -> None:
    """The certifying guide's table names each blind spot's check and mutant."""
    guide = (ROOT / "docs" / "guides" / "certifying.md").read_text()
    missing = [
        f"{check_id}/{mutant}"
        for *_, check_id, _, mutant in BLIND_SPOTS
        if f"`{check_id}`" not in guide or f"`{mutant}`" not in guide
    ]
    assert missing == [], f"rows missing from docs/guides/certifying.md: {missing}"


def test_every_self_test_module_is_found() -> None:
    """The scan sees the selftests directory and the original self-test module."""
    names = [path.name for path in self_test_modules()]
    assert "test_kit_self_tests.py" in names
    assert len(names) >= 2
