"""T11 through two handles: a ``put_many`` is seen whole or not at all by another handle.

One handle writes numbered rounds of one batch (every ref gets the round's
number) while a second handle reads the refs in batch order, again and again.
Each read comes after the one before it, so against an all-or-nothing batch a
later ref can never hold an older round than an earlier ref did; a store that
lands the items one by one lets the reader see the first ref of a round before
the last. Then the writer is superseded and its next batch must change nothing
the second handle can see.
"""

from __future__ import annotations

import threading
from typing import Final, cast

from rulvar_conformance.harness.kit import attempt, not_run, require, run_concurrently
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import expect_refused, leasable
from rulvar_store import BatchTranscriptStore, OpenedStore, has_batch_put
from rulvar_store.backend import LocationFactory

__all__ = ["batch_seen_whole"]

RUN: Final = "batch-handles-run"
REFS: Final = (f"{RUN}/c/1", f"{RUN}/p/latest", f"{RUN}/w/1")
ROUNDS: Final = 40


def _batching(opened: OpenedStore) -> BatchTranscriptStore:
    blobs = opened.transcripts
    if has_batch_put(blobs):
        return cast(BatchTranscriptStore, blobs)
    not_run("the blob twin offers no put_many (an optional ability, T11)")
    raise AssertionError("not_run returns only by raising")


def _round_of(blob: bytes | None) -> int:
    return -1 if blob is None else int(blob.decode())


def batch_seen_whole(locations: LocationFactory, caps: frozenset[str]) -> None:
    """A second handle sees every batch whole, and nothing of a refused one."""
    with at_fresh_location(locations, needs=("shared",)) as site:
        a = site.open(None)
        b = site.open(None)
        writer, reader = _batching(a), b.transcripts
        lease = leasable(a).acquire(RUN, "batch-writer")
        done = threading.Event()
        torn: list[str] = []

        def write() -> None:
            try:
                for round_no in range(ROUNDS):
                    writer.put_many(
                        [(ref, str(round_no).encode()) for ref in REFS], lease
                    )
            finally:
                done.set()

        def read() -> None:
            while not done.is_set():
                rounds = [_round_of(reader.get(ref)) for ref in REFS]
                if rounds != sorted(rounds):
                    torn.append(f"{dict(zip(REFS, rounds, strict=True))}")

        outcomes = run_concurrently([write, read])
        require(
            all(outcome.ok for outcome in outcomes),
            f"the batch writer or the reader raised: {[o.error for o in outcomes]}",
        )
        require(
            not torn,
            "a second handle saw part of a batch (reading in batch order, a later "
            f"ref held an older round than an earlier one): {torn[:3]} (T11)",
        )
        last = [reader.get(ref) for ref in REFS]
        require(
            last == [str(ROUNDS - 1).encode()] * len(REFS),
            f"after {ROUNDS} batches the second handle read {last} (T11)",
        )
        leasable(a).release(lease)
        leasable(b).acquire(RUN, "batch-successor")
        expect_refused(
            attempt(lambda: writer.put_many([(ref, b"stale") for ref in REFS], lease)),
            "a superseded owner's put_many (T11)",
        )
        after = [reader.get(ref) for ref in REFS]
        require(
            after == last,
            f"the refused batch changed what the second handle reads: {after} (T11, F3)",
        )
