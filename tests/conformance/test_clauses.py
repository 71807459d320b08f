"""Clause bookkeeping: every cited id exists, every required clause is cited."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from rulvar_conformance import CLAUSES, ConformanceSuite
from rulvar_conformance.clauses import clause_family
from rulvar_conformance.harness.certify import (
    Certification,
    certification_suites,
    suite_specs,
)
from rulvar_store.backend import StoreLocation

TESTS_ROOT: Final = Path(__file__).resolve().parents[1]
REQUIRED_FAMILIES: Final = ("J", "M", "L", "F", "T", "C")
_MARK: Final = re.compile(r"""mark\.clause\(\s*["']([^"']*)["']\s*\)""")


def _never_opened() -> StoreLocation:
    raise AssertionError("only the check list is read")


def all_suites() -> list[ConformanceSuite]:
    capabilities = frozenset(s.capability for s in suite_specs() if s.capability)
    return certification_suites(Certification(_never_opened, capabilities), ["all"])


def cited_by_checks() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for suite in all_suites():
        for check in suite.checks:
            for clause in check.clauses:
                cited.setdefault(clause, set()).add(f"check {check.id}")
    return cited


def cited_by_tests() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for path in sorted(TESTS_ROOT.rglob("*.py")):
        if "build" in path.parts:
            continue
        for clause in _MARK.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(clause, set()).add(str(path.relative_to(TESTS_ROOT)))
    return cited


def test_clause_sentences_are_single_sentences() -> None:
    """Each clause id maps to one non-empty sentence ending with a period."""
    for clause_id, sentence in CLAUSES.items():
        assert re.fullmatch(r"[A-Z][0-9]+", clause_id), clause_id
        assert sentence.endswith("."), clause_id
        assert sentence.count(". ") == 0, clause_id


@pytest.mark.clause("C4")
def test_every_cited_clause_exists() -> None:
    """No check and no ``@pytest.mark.clause`` under tests/ names an unknown id."""
    cited = {**cited_by_tests(), **cited_by_checks()}
    unknown = {
        clause: sorted(where)
        for clause, where in cited.items()
        if clause not in CLAUSES
    }
    assert unknown == {}


@pytest.mark.clause("C4")
def test_every_required_clause_is_cited() -> None:
    """Every J, M, L, F, T and C clause has at least one check or test citing it."""
    cited = set(cited_by_checks()) | set(cited_by_tests())
    required = {c for c in CLAUSES if clause_family(c) in REQUIRED_FAMILIES}
    assert sorted(required - cited) == []


def test_required_set_covers_the_contract_families() -> None:
    """The required set is not vacuous: it holds every id of those families."""
    required = sorted(c for c in CLAUSES if clause_family(c) in REQUIRED_FAMILIES)
    assert len(required) == 8 + 6 + 16 + 6 + 13 + 5
    assert {"J1", "M6", "L10", "F6", "T13", "C5"} <= set(required)


def test_brief_clause_ids_are_all_present() -> None:
    """The ids the kit and project tests cite are all defined, S11 included."""
    expected = (
        [f"D{i}" for i in range(1, 10)]
        + [f"J{i}" for i in range(1, 9)]
        + [f"M{i}" for i in range(1, 7)]
        + [f"L{i}" for i in range(1, 11)]
        + [f"F{i}" for i in range(1, 7)]
        + [f"T{i}" for i in range(1, 10)]
        + [f"Q{i}" for i in range(1, 14)]
        + [f"P{i}" for i in range(1, 11)]
        + [f"C{i}" for i in range(1, 6)]
        + [f"X{i}" for i in range(1, 8)]
        + ["S11"]
    )
    assert [c for c in expected if c not in CLAUSES] == []


def test_every_check_carries_clauses() -> None:
    """Each check names at least one clause, so every item gets a clause mark."""
    for suite in all_suites():
        for check in suite.checks:
            assert check.clauses, check.id
            assert check.title, check.id
