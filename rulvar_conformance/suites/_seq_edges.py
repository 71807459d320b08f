"""Seq edges of the data-edges suite (D5, J2, J6): what counts as a seq, and what does not.

A *finite seq* is an ``int`` or ``float`` that is finite and not a ``bool`` (D5).
Entries without one keep their append position and bypass the guard; floats and
ints beyond 64 bits compare exactly as numbers; ``true`` is not ``1``. D5's
PostgreSQL exception lets a store refuse a present, non-null, non-number seq
with a typed, non-retryable ``ContractError`` that stores nothing; that and
"stored as is, guard bypassed" are the only two accepted answers.
"""

from __future__ import annotations

from typing import Any, Final

from rulvar_conformance.harness.kit import Outcome, attempt, require
from rulvar_conformance.harness.probe import describe, difference
from rulvar_store import (
    ContractError,
    JournalEntry,
    JournalOrderViolation,
    JournalStore,
)
from rulvar_store.backend import stable_stringify

__all__ = [
    "FLOAT_AND_HUGE_STEPS",
    "float_and_huge_seqs",
    "non_number_seqs",
    "unseq_position",
]

FLOAT_AND_HUGE_STEPS: Final[tuple[tuple[int | float, bool], ...]] = (
    (-5, True), (-3, True), (-4, False), (0, True), (0.5, True), (1, True),
    (1.5, True), (1.25, False), (1.5, False), (2, True), (2.000001, True),
    (2, False), (3, True), (3.0, False), (3.5, True),
    (2**53, True), (2**53 + 2, True), (2**53 + 1, False),
    (2**62, True), (2**63, True), (2**62 + 7, False),
    (2**63 + 1, True), (2**63 + 1, False), (2**63 + 2, True),
    (2**64, True), (2**65, True), (2**64 + 1, False),
    (2**65 + 1, True), (2**65 + 1, False),
    (10**30, True), (10**30 + 1, True), (10**30 + 1, False),
    (10**31, True), (1e300, True), (1e301, True),
)  # fmt: skip
"""``(seq, accepted)`` in append order: each must be accepted exactly when it is
strictly above every earlier accepted seq. Integer neighbours beyond 64 bits
share one double (``2**63 + 1`` after ``2**63``): a store that widens them to
floats refuses what it must accept (J6 promises exact order). No float ties an
int here: PostgreSQL reads a float's JSON text as a decimal, Python as binary."""


def entry(tag: str, **fields: Any) -> JournalEntry:
    """A small entry telling appends apart by ``key``."""
    return {"kind": "step", "status": "ok", "key": tag, **fields}


class Ledger:
    """The entries a run must hold: every accepted append, in order."""

    def __init__(self, store: JournalStore, run: str) -> None:
        self.store = store
        self.run = run
        self.expected: list[JournalEntry] = []

    def accepted(self, item: JournalEntry, what: str) -> None:
        outcome = attempt(lambda: self.store.append(self.run, item))
        require(
            outcome.ok,
            f"{what}: expected the append to succeed, observed {describe(outcome.error)}",
        )
        self.expected.append(item)

    def refused_by_guard(self, item: JournalEntry, what: str) -> None:
        outcome = attempt(lambda: self.store.append(self.run, item))
        require(
            isinstance(outcome.error, JournalOrderViolation),
            f"{what}: expected JournalOrderViolation (J6), observed {describe(outcome.error)}",
        )

    def non_number(self, item: JournalEntry, what: str) -> None:
        """Accepted as is (guard bypassed), or refused as D5's exception allows."""
        outcome: Outcome[None] = attempt(lambda: self.store.append(self.run, item))
        if outcome.ok:
            self.expected.append(item)
            return
        error = outcome.error
        require(
            isinstance(error, ContractError)
            and not isinstance(error, JournalOrderViolation)
            and not getattr(error, "retryable", True),
            f"{what}: expected success (the guard bypassed, D5) or a non-retryable "
            f"ContractError refusing the non-number seq, observed {describe(error)}"
            + (
                " (the store compared a non-number as a seq)"
                if isinstance(error, JournalOrderViolation)
                else ""
            ),
        )

    def require_loaded(self, when: str) -> None:
        loaded = self.store.load(self.run)
        expected = stable_stringify(self.expected)
        observed = stable_stringify(loaded)
        require(
            observed == expected,
            f"{when}: run {self.run!r} loads wrong: "
            f"{difference(self.expected, loaded)}",
        )


def unseq_position(store: JournalStore) -> None:
    """Entries without a seq (or with ``seq: null``) keep their append position."""
    ledger = Ledger(store, "unseq")
    ledger.accepted(entry("s0", seq=0), "seq 0")
    ledger.accepted(entry("no-seq-a"), "an entry without seq after seq 0")
    ledger.accepted(entry("s1", seq=1), "seq 1 after an entry without seq")
    ledger.accepted(entry("null-seq", seq=None), "an entry with seq null")
    ledger.accepted(entry("no-seq-b"), "a second entry without seq")
    ledger.accepted(entry("s2", seq=2), "seq 2")
    ledger.refused_by_guard(
        entry("s2-again", seq=2), "seq 2 again after entries without seq"
    )
    ledger.accepted(entry("no-seq-c"), "an entry without seq after the refusal")
    ledger.require_loaded("entries with and without seq")


def non_number_seqs(store: JournalStore) -> None:
    """``true``, ``false``, strings and containers are not seqs (D5)."""
    first = Ledger(store, "bool-first")
    first.non_number(entry("true-first", seq=True), "seq true on an empty run")
    first.accepted(entry("s1", seq=1), "seq 1 after seq true (true is not 1)")
    first.non_number(
        entry("false", seq=False), "seq false after seq 1 (false is not 0)"
    )
    first.accepted(entry("s2", seq=2), "seq 2 after seq false")
    first.require_loaded("seq true/false around numbers")
    after = Ledger(store, "bool-after")
    after.accepted(entry("s5", seq=5), "seq 5")
    after.non_number(entry("true-after", seq=True), "seq true after seq 5")
    after.accepted(entry("s6", seq=6), "seq 6 after seq true")
    for text in ("3", "9", "abc", "", "1e3"):
        after.non_number(
            entry(f"str-{text}", seq=text), f"string seq {text!r} after seq 6"
        )
    after.accepted(entry("s7", seq=7), "seq 7 after string seqs (strings are not seqs)")
    after.non_number(entry("list", seq=[8]), "seq [8]")
    after.non_number(entry("object", seq={"n": 9}), "seq {'n': 9}")
    after.accepted(entry("s8", seq=8), "seq 8 after container seqs")
    after.refused_by_guard(entry("s7-again", seq=7), "seq 7 after seq 8")
    after.require_loaded("non-number seqs among numbers")


def float_and_huge_seqs(store: JournalStore) -> None:
    """Floats and ints far beyond 64 bits are compared exactly as numbers (D5, J6)."""
    ledger = Ledger(store, "float-huge")
    for index, (seq, accepted) in enumerate(FLOAT_AND_HUGE_STEPS):
        item = entry(f"step-{index}", seq=seq, value={"seq": seq})
        if accepted:
            ledger.accepted(
                item, f"seq {seq!r} (step {index}, above every earlier seq)"
            )
        else:
            ledger.refused_by_guard(
                item, f"seq {seq!r} (step {index}, not above an earlier seq)"
            )
    ledger.require_loaded("float and huge-int seqs (ints must come back as exact ints)")
