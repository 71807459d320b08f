"""What the self-test modules share: running one named check against a broken store,
and the honest delegating wrappers their broken in-memory stores start from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

from rulvar_conformance import (
    Certification,
    CheckNotRun,
    CheckResult,
    ConformanceFailure,
    ConformanceSuite,
    certification_suites,
    run_suites,
)
from rulvar_store import (
    JournalEntry,
    Lease,
    MemoryFencedTranscriptStore,
    MemoryStore,
    RunFilter,
    RunMeta,
)
from rulvar_store.backend import LocationFactory
from rulvar_store_sqlite import SqliteStore
from tests.conformance.selftests import _broken_memory_races, _broken_sqlite
from tests.conformance.selftests._broken_memory_races import memory_locations

FULL: Final = frozenset(
    {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
)
"""What every broken store declares (each is a real fenced store with one bug)."""


def broken_locations(name: str, directory: Path) -> LocationFactory:
    """The location factory of the broken store class ``name`` (SQLite or memory)."""
    sqlite_cls = getattr(_broken_sqlite, name, None)
    if isinstance(sqlite_cls, type) and issubclass(sqlite_cls, SqliteStore):
        return _broken_sqlite.sqlite_locations(sqlite_cls, directory)
    memory_cls = getattr(_broken_memory_races, name)
    assert isinstance(memory_cls, type)
    assert issubclass(memory_cls, MemoryStore)
    return _broken_memory_races.memory_locations(memory_cls)


def failure_of(
    locations: LocationFactory,
    suite: str,
    check_id: str,
    capabilities: frozenset[str] = FULL,
) -> str:
    """Run ``check_id`` of ``suite``; it must fail. Return the failure's detail."""
    (built,) = certification_suites(Certification(locations, capabilities), [suite])
    try:
        built.check(check_id).run()
    except ConformanceFailure as failure:
        named = failure
    except CheckNotRun as skipped:
        raise AssertionError(f"{check_id} did not run: {skipped.reason}") from None
    else:
        raise AssertionError(f"{check_id} passed against the broken store")
    assert named.check_id == check_id
    return named.detail


def check_result(locations: LocationFactory, suite: str, check_id: str) -> CheckResult:
    """Run ``check_id`` of ``suite`` as ``rulvar check`` does: its result, never a raise."""
    (built,) = certification_suites(Certification(locations, FULL), [suite])
    (result,) = run_suites([ConformanceSuite(suite, (built.check(check_id),))])
    return result


def not_run_reason(locations: LocationFactory, suite: str, check_id: str) -> str:
    """Run ``check_id``; it must report not run. Return the reason."""
    (built,) = certification_suites(Certification(locations, FULL), [suite])
    try:
        built.check(check_id).run()
    except CheckNotRun as skipped:
        return skipped.reason
    raise AssertionError(f"{check_id} ran although it should not")


PhraseCases = Sequence[tuple[str, str, str]]
"""(check id, broken store class name for ``broken_locations``, a failure phrase)."""


def broken_store_self_tests(
    suite: str, cases: PhraseCases, self_tested: frozenset[str], doc: str
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The C4 test of a suite proven with named broken stores, and its bookkeeping test.

    The first needs each case's check to fail against its broken store (on fresh
    locations under ``tmp_path``) with the phrase in the failure; ``doc`` says
    what the broken stores get wrong. The second holds the module's literal
    ``SELF_TESTED`` (what the meta-test reads) to the checks the cases run.
    """

    @pytest.mark.clause("C4")
    @pytest.mark.parametrize(
        ("check_id", "broken", "phrase"),
        cases,
        ids=[f"{check}-{broken}" for check, broken, _ in cases],
    )
    def test_broken_store_fails_the_named_check(
        check_id: str, broken: str, phrase: str, tmp_path: Path
    ) -> None:
        detail = failure_of(broken_locations(broken, tmp_path), suite, check_id)
        assert phrase in detail, detail

    def test_self_tested_names_exactly_the_checks_exercised_here() -> None:
        """SELF_TESTED (a literal, for the meta-test) lists the checks the cases run."""
        assert frozenset(check for check, _, _ in cases) == self_tested

    test_broken_store_fails_the_named_check.__doc__ = doc
    return (
        test_broken_store_fails_the_named_check,
        test_self_tested_names_exactly_the_checks_exercised_here,
    )


MemoryCases = Sequence[tuple[str, type[MemoryStore], str]]
"""(check id, broken MemoryStore subclass, a phrase the failure must contain)."""


def memory_store_self_tests(
    suite: str, cases: MemoryCases
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two C4 tests of a suite proven with broken ``MemoryStore`` subclasses.

    The first needs each case's check to fail against its broken store, saying the
    phrase; the second, the control, needs the honest ``MemoryStore`` to pass the
    whole suite. The module binds both at top level for pytest to collect.
    """

    @pytest.mark.clause("C4")
    @pytest.mark.parametrize(
        ("check_id", "broken", "says"),
        cases,
        ids=[f"{check}-{broken.__name__}" for check, broken, _ in cases],
    )
    def test_broken_store_fails_the_named_check(
        check_id: str, broken: type[MemoryStore], says: str
    ) -> None:
        """A MemoryStore with one plausible bug fails the check written for it."""
        detail = failure_of(memory_locations(broken), suite, check_id)
        assert says in detail, detail

    @pytest.mark.clause("C4")
    def test_the_honest_memory_store_passes() -> None:
        """Control: the real MemoryStore passes every check of the suite it can run,
        every check its broken stores fail included. A check that needs what the
        memory store has not (a before-commit failpoint) is not run here; its
        control runs on a store that has it."""
        (built,) = certification_suites(
            Certification(memory_locations(MemoryStore), FULL), [suite]
        )
        ran = set()
        for check in built.checks:
            try:
                check.run()
            except CheckNotRun:
                continue
            ran.add(check.id)
        assert {check for check, _, _ in cases} <= ran

    return test_broken_store_fails_the_named_check, test_the_honest_memory_store_passes


RACE_RUNS: Final = 3
"""Runs a real-thread race check gets to catch a broken store (see below)."""


def race_failure_of(
    locations_for_run: Callable[[int], LocationFactory],
    suite: str,
    check_id: str,
    capabilities: frozenset[str] = FULL,
) -> str:
    """``failure_of`` for a check that races real threads under a time budget.

    On a loaded machine the budget may pass without the racing thread landing in
    the window: the broken store must lose within RACE_RUNS runs of the check
    (each on fresh locations), not always in the first.
    """
    for run in range(RACE_RUNS):
        try:
            return failure_of(locations_for_run(run), suite, check_id, capabilities)
        except AssertionError as passed:
            if "passed against the broken store" not in str(passed):
                raise
    raise AssertionError(f"{check_id} passed against the broken store {RACE_RUNS}x")


class MemoryStoreDelegate:
    """Every store method passed to ``self.inner``; a broken subclass overrides one.

    Construction and ``close`` stay with the subclass: the kit's original
    self-tests own their ``MemoryStore``, the memory handles share a domain.
    """

    fenced_writes: Any = True
    inner: MemoryStore

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self.inner.append(run_id, entry, lease)

    def load(self, run_id: str) -> list[JournalEntry]:
        return self.inner.load(run_id)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self.inner.put_meta(meta, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        return self.inner.get_meta(run_id)

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return self.inner.list_runs(run_filter)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self.inner.delete(run_id, lease)

    def acquire(self, run_id: str, owner: str) -> Lease:
        return self.inner.acquire(run_id, owner)

    def renew(self, lease: Lease) -> None:
        self.inner.renew(lease)

    def release(self, lease: Lease) -> None:
        self.inner.release(lease)


class MemoryTwinDelegate:
    """Every fenced blob method passed to ``self.inner``; a subclass breaks one."""

    fenced_writes: Any = True
    inner: MemoryFencedTranscriptStore

    def put(
        self, ref: str, blob: bytes | bytearray | memoryview, lease: Lease | None = None
    ) -> None:
        self.inner.put(ref, blob, lease)

    def put_many(
        self, items: list[tuple[str, bytes]], lease: Lease | None = None
    ) -> None:
        self.inner.put_many(items, lease)

    def get(self, ref: str) -> bytes | None:
        return self.inner.get(ref)

    def list_refs(self, run_id: str) -> list[str]:
        return self.inner.list_refs(run_id)

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        return self.inner.last_ref(run_id, prefix)

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        return self.inner.get_under(run_id, prefix)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        self.inner.delete(ref, lease)
