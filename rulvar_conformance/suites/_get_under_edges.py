"""``get_under`` answers exactly: every live blob of the run under a prefix, sorted (T13).

The refs and prefixes are ``last_ref``'s (``_last_ref_edges``): prefixes of
other refs, boundary code points, deletes, other runs. Each blob holds its own
ref's bytes, so a pair with the wrong blob shows. The expected answer is
computed here in code point order, and the store is asked through a second
handle where the location is shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import cast

from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.probe import describe
from rulvar_conformance.suites._last_ref_edges import (
    DECOYS,
    SAFE_PREFIXES,
    SAFE_REFS,
    SAFE_RUN,
    WIDE_PREFIXES,
    WIDE_REFS,
    WIDE_RUN,
    stored_all,
)
from rulvar_store import TranscriptStore
from rulvar_store.backend import GetUnderTranscriptStore, has_get_under

__all__ = ["get_under_exact"]


def _answers(
    reader: GetUnderTranscriptStore,
    run_id: str,
    stored: Sequence[str],
    prefixes: Sequence[str],
    when: str,
) -> None:
    for prefix in prefixes:
        expected = [
            (ref, ref.encode()) for ref in sorted(stored) if ref.startswith(prefix)
        ]
        outcome = attempt(partial(reader.get_under, run_id, prefix))
        observed = outcome.value if outcome.ok else None
        require(
            isinstance(observed, list)
            and [(ref, bytes(blob)) for ref, blob in observed] == expected,
            f"get_under({run_id!r}, {prefix!r}) {when}: expected {expected!r} (every "
            "live blob of the run under the prefix, sorted by code point), observed "
            + (repr(observed) if outcome.ok else describe(outcome.error)),
        )


def get_under_exact(writer: TranscriptStore, reader: TranscriptStore) -> None:
    """``get_under`` returns each live blob under each prefix, of its run only, in order."""
    if not (has_get_under(writer) and has_get_under(reader)):
        not_run("the blob store offers no get_under (an optional ability, T13)")
    answering = cast(GetUnderTranscriptStore, reader)
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
    never = attempt(partial(answering.get_under, "never-stored", "never-stored/"))
    require(
        never.ok and never.value == [],
        "get_under of a run never stored: expected [], observed "
        + (repr(never.value) if never.ok else describe(never.error)),
    )
