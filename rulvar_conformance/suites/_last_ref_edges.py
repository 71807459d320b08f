"""``last_ref`` answers exactly: the greatest live ref of the run under a prefix (T12).

The expected answer is computed here from what was stored, in code point order
(Python's ``str`` order, the order ``list_refs`` returns, T4), and the store
is asked through a second handle where the location is shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Final, cast

from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.probe import describe
from rulvar_store import (
    ContractError,
    TranscriptStore,
)
from rulvar_store.backend import LastRefTranscriptStore, has_last_ref

__all__ = ["last_ref_exact", "stored_all"]

SAFE_RUN: Final = "lr-1"
SAFE_REFS: Final = (
    "lr-1/ns/0001", "lr-1/ns/0002", "lr-1/ns/0010", "lr-1/ns2/0003",
    "lr-1/nsa", "lr-1/c/Z", "lr-1/c/_", "lr-1/c/a", "lr-1/c/a0",
)  # fmt: skip
"""Refs every store can hold (safe tokens): ``lr-1/ns`` prefixes ``lr-1/ns2/...``
and ``lr-1/nsa``; ``Z`` < ``_`` < ``a`` by code point but not in a locale's order."""

SAFE_PREFIXES: Final = (
    "lr-1/", "lr-1/ns", "lr-1/ns/", "lr-1/ns/000", "lr-1/ns/0002", "lr-1/ns/00020",
    "lr-1/nz", "lr-1/ns2/", "lr-1/c/", "lr-1/c/a", "lr-1/c/Z", "lr-1/c/z",
)  # fmt: skip

DECOYS: Final = ("lr-2/ns/9999", "lr-10/ns/9999", "lr-1x/ns/9999", "lr-1")
"""Other runs' refs (and the slashless one) that a sloppy match would answer."""

WIDE_RUN: Final = "lr-u"
WIDE_REFS: Final = (
    "lr-u/k/a~", "lr-u/k/a", "lr-u/k/a\u00a0", "lr-u/k/a\u00e9", "lr-u/k/a\uffff",
    "lr-u/k/a\U0010ffff", "lr-u/k/a\U0010ffffz", "lr-u/k/B", "lr-u/k\U0010ffff/x",
    "lr-u/c\ud7ff1", "lr-u/c\ue000", "lr-u/l",
)  # fmt: skip
"""Characters near the edges of a range scan: U+10FFFF (no successor), the
code points either side of the surrogates, non-ASCII. The first is not a safe
token, so a file store refuses the family at once (T8)."""

WIDE_PREFIXES: Final = (
    "lr-u/", "lr-u/k", "lr-u/k/", "lr-u/k/a", "lr-u/k/a\U0010ffff",
    "lr-u/k/a\uffff", "lr-u/k/a\u00e9", "lr-u/c\ud7ff", "lr-u/c", "lr-u/k/b",
)  # fmt: skip


def _expected(stored: Sequence[str], prefix: str) -> str | None:
    return max((ref for ref in stored if ref.startswith(prefix)), default=None)


def stored_all(writer: TranscriptStore, refs: Sequence[str]) -> bool:
    """Put every ref; ``False`` if the store refuses its names (typed, T8)."""
    for index, ref in enumerate(refs):
        outcome = attempt(partial(writer.put, ref, ref.encode()))
        if isinstance(outcome.error, ContractError) and index == 0:
            return False
        require(
            outcome.ok,
            f"put {ref!r}: expected success, observed {describe(outcome.error)}",
        )
    return True


def _answers(
    reader: LastRefTranscriptStore,
    run_id: str,
    stored: Sequence[str],
    prefixes: Sequence[str],
    when: str,
) -> None:
    for prefix in prefixes:
        expected = _expected(stored, prefix)
        outcome = attempt(partial(reader.last_ref, run_id, prefix))
        require(
            outcome.ok and outcome.value == expected,
            f"last_ref({run_id!r}, {prefix!r}) {when}: expected {expected!r} (the "
            f"greatest by code point of the run's refs under the prefix), observed "
            + (repr(outcome.value) if outcome.ok else describe(outcome.error)),
        )


def last_ref_exact(writer: TranscriptStore, reader: TranscriptStore) -> None:
    """``last_ref`` names the greatest live ref under each prefix, of its run only."""
    if not (has_last_ref(writer) and has_last_ref(reader)):
        not_run("the blob store offers no last_ref (an optional ability, T12)")
    answering = cast(LastRefTranscriptStore, reader)
    require(
        stored_all(writer, (*SAFE_REFS, *DECOYS)),
        "expected the store to accept safe-token refs",
    )
    stored = list(SAFE_REFS)
    _answers(answering, SAFE_RUN, stored, SAFE_PREFIXES, "")
    for gone in ("lr-1/ns/0010", "lr-1/c/a0", "lr-1/ns2/0003", "lr-1/nsa"):
        writer.delete(gone)
        stored.remove(gone)
    _answers(answering, SAFE_RUN, stored, SAFE_PREFIXES, "after deletes")
    if stored_all(writer, WIDE_REFS):
        _answers(answering, WIDE_RUN, WIDE_REFS, WIDE_PREFIXES, "")
    never = attempt(partial(answering.last_ref, "never-stored", "never-stored/"))
    require(
        never.ok and never.value is None,
        "last_ref of a run never stored: expected None, observed "
        + (repr(never.value) if never.ok else describe(never.error)),
    )
