"""The pytest plugin certifies stores as test items, both ways, and is inert otherwise.

Each test runs a real ``python -m pytest`` in a scratch project with its own
``pytest.ini``, so the plugin loads through its installed ``pytest11`` entry point
exactly as in a user's project.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rulvar_conformance import (
    CLAUSES,
    Certification,
    ConformanceSuite,
    certification_suites,
)
from rulvar_store.backend import StoreLocation

PLAIN_TEST = "def test_plain():\n    pass\n"

FACTORY_CONFTEST = textwrap.dedent(
    """
    import pytest
    from rulvar_store import MemoryStore, OpenedStore

    @pytest.fixture(scope="session")
    def rulvar_store_factory():
        def fresh(ttl_ms):
            store = MemoryStore(ttl_ms=ttl_ms or 60_000)
            return OpenedStore(store, store.transcripts(), (store.close,))
        return fresh
    """
)

EVERY_CAPABILITY = frozenset(
    {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
)


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


CLASSIC_SUITES = ("journal", "leasable", "fenced-writes", "fenced-transcripts")


def classic_suites(capabilities: frozenset[str]) -> list[ConformanceSuite]:
    """The four classic suites a certification with ``capabilities`` builds."""
    return certification_suites(
        Certification(_never_opened, capabilities), CLASSIC_SUITES
    )


def classic_check_count(capabilities: frozenset[str]) -> int:
    return sum(len(suite.checks) for suite in classic_suites(capabilities))


REORDERING_CONFTEST = textwrap.dedent(
    """
    import pytest
    from rulvar_store import MemoryStore, OpenedStore

    class Reordering:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def load(self, run_id):
            return list(reversed(self.inner.load(run_id)))

    @pytest.fixture
    def rulvar_store_factory():
        def fresh(ttl_ms):
            store = MemoryStore(ttl_ms=ttl_ms or 60_000)
            return OpenedStore(Reordering(store), store.transcripts(), (store.close,))
        return fresh
    """
)


# The four suites of CONTRACT 8.2-8.6, whose item counts these tests pin; the
# newer suites (two handles, races, ...) have plugin tests of their own.
CLASSIC = tuple(arg for name in CLASSIC_SUITES for arg in ("--rulvar-suite", name))


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def write(project: Path, relative: str, text: str) -> None:
    path = project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_plugin_adds_nothing_unless_asked(tmp_path: Path) -> None:
    """Without --rulvar-store or --rulvar-certify only the project's own tests exist."""
    write(tmp_path, "test_plain.py", PLAIN_TEST)
    write(tmp_path, "conftest.py", FACTORY_CONFTEST)
    done = run_pytest(tmp_path, "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rulvar-conformance" not in done.stdout
    assert "1 test collected" in done.stdout


@pytest.mark.clause("C2")
def test_store_url_certifies_memory_with_every_suite(tmp_path: Path) -> None:
    """--rulvar-store=memory:// runs all 29 checks as items named by suite and check."""
    done = run_pytest(tmp_path, "--rulvar-store=memory://", "-v", *CLASSIC)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{classic_check_count(EVERY_CAPABILITY)} passed" in done.stdout
    for item in (
        "rulvar-conformance[memory]::test_journal[a1-append-atomicity] PASSED",
        "rulvar-conformance[memory]::test_leasable[lease-ttl-and-renew-cadence] PASSED",
        "rulvar-conformance[memory]::test_fenced_writes[fenced-run-match] PASSED",
        "rulvar-conformance[memory]::test_fenced_transcripts"
        "[fenced-transcripts-stale-put-rejected] PASSED",
    ):
        assert item in done.stdout


@pytest.mark.clause("C2")
def test_clause_ids_select_kit_items(tmp_path: Path) -> None:
    """Each item is marked with its clauses and ``-k L5`` selects exactly those."""
    done = run_pytest(
        tmp_path, "--rulvar-store=memory://", "--collect-only", "-q", "-k", "L5",
        *CLASSIC,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    selected = sorted(line for line in done.stdout.splitlines() if "::" in line)
    expected = sorted(
        f"rulvar-conformance[memory]::test_{suite.name.replace('-', '_')}[{check.id}]"
        for suite in classic_suites(EVERY_CAPABILITY)
        for check in suite.checks
        if "L5" in check.clauses
    )
    assert selected == expected
    assert (
        "rulvar-conformance[memory]::test_leasable[fencing-epoch-tombstone]" in selected
    )
    marked = run_pytest(tmp_path, "--rulvar-store=memory://", "--collect-only", "-q",
                        "-m", "clause", *CLASSIC)  # fmt: skip
    marked_items = [line for line in marked.stdout.splitlines() if "::" in line]
    assert len(marked_items) == classic_check_count(EVERY_CAPABILITY) == 29


def test_unknown_store_url_is_a_usage_error(tmp_path: Path) -> None:
    """A URL no backend claims stops the run before collection, naming the scheme."""
    done = run_pytest(tmp_path, "--rulvar-store=nosuch://x")
    assert done.returncode == 4
    assert "no store backend for scheme 'nosuch'" in done.stderr


@pytest.mark.clause("C2")
def test_conftest_factory_is_certified_under_its_directory(tmp_path: Path) -> None:
    """--rulvar-certify adds the items beside the conftest that defines the factory."""
    write(tmp_path, "tests/store/conftest.py", FACTORY_CONFTEST + textwrap.dedent(
        """
        @pytest.fixture
        def rulvar_store_capabilities():
            return frozenset({"leases"})
        """
    ))  # fmt: skip
    write(tmp_path, "tests/store/test_plain.py", PLAIN_TEST)
    done = run_pytest(tmp_path, "--rulvar-certify", "-v", *CLASSIC)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    counts = {
        word: int(number)
        for number, word in (
            part.strip().split(" ")[:2] for part in summary.strip("= ").split(",")
        )
        if word in ("passed", "skipped", "failed")
    }
    # The plain test plus every classic check; what a leases-only factory cannot
    # serve (the fenced suites) is skipped, never passed.
    assert "failed" not in counts, summary
    assert counts["passed"] + counts["skipped"] == 1 + classic_check_count(
        EVERY_CAPABILITY
    )
    assert counts["skipped"] >= 11
    assert (
        "tests/store/rulvar-conformance::test_leasable[fencing-stale-epoch] PASSED"
        in (done.stdout)
    )
    assert (
        "tests/store/rulvar-conformance::test_fenced_writes[fenced-run-match] SKIPPED"
        in (done.stdout)
    )


@pytest.mark.clause("C4")
def test_conftest_factory_of_a_broken_store_fails_the_named_item(
    tmp_path: Path,
) -> None:
    """A reordering store fails its a2 item with the check's own failure message."""
    write(tmp_path, "conftest.py", REORDERING_CONFTEST)
    done = run_pytest(tmp_path, "--rulvar-certify", "-q", "-k", "test_journal and a2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "store-conformance a2-total-order:" in done.stdout


def test_a_failed_kit_item_reports_the_clause_texts_not_a_kit_traceback(
    tmp_path: Path,
) -> None:
    """The failure reads like rulvar check's row: title, each clause's text, detail."""
    write(tmp_path, "conftest.py", REORDERING_CONFTEST)
    done = run_pytest(tmp_path, "--rulvar-certify", "-q", "-k", "test_journal and a2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"J2: {CLAUSES['J2']}" in done.stdout
    assert f"J6: {CLAUSES['J6']}" in done.stdout
    assert "concurrent appends serialize into one stable order" in done.stdout
    assert "failed: " in done.stdout
    assert "harness/kit.py" not in done.stdout  # no traceback into the kit


def test_certify_flag_without_a_factory_is_a_usage_error(tmp_path: Path) -> None:
    """--rulvar-certify with no conftest defining the fixture says what is missing."""
    write(tmp_path, "test_plain.py", PLAIN_TEST)
    done = run_pytest(tmp_path, "--rulvar-certify")
    assert done.returncode == 4
    assert "rulvar_store_factory" in done.stderr
