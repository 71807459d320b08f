"""The fenced-transcripts suite: the fenced blob twin (CONTRACT 8.6, T6).

Built by ``fenced_transcripts_suite(certification)`` or, over a plain factory,
``fenced_transcripts_conformance(mk)``, where ``mk`` returns a
``FencedTranscriptsFixture``: a leasable journal store and a
transcript store sharing ONE fencing domain (for SQLite and Postgres,
``store.transcripts()``). Leases come from the journal; blob writes are fenced by
them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, cast

from rulvar_conformance.harness.certification import (
    CERTIFY_TTL_MS,
    Certification,
    SuiteSpec,
    fresh_store,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Fresh,
    Outcome,
    attempt,
    build_check,
    each_fresh,
    not_run,
    require,
)
from rulvar_conformance.harness.surfaces import leasable
from rulvar_store import (
    BatchTranscriptStore,
    InvalidArgumentError,
    LeasableStore,
    LeaseHeldError,
    TranscriptStore,
    has_batch_put,
    has_fenced_writes,
)

__all__ = [
    "SPEC",
    "FencedTranscriptsFixture",
    "fenced_transcripts_conformance",
    "fenced_transcripts_suite",
]

RUN: Final = "fenced-run"
OTHER_RUN: Final = "fenced-other-run"
REF: Final = "fenced-run/ckpt/7"


@dataclass(frozen=True)
class FencedTranscriptsFixture:
    """A journal store and its transcript twin over one fencing domain."""

    journal: LeasableStore
    transcripts: TranscriptStore

    def close(self) -> None:
        """Close the journal store, which closes its twin (T7)."""
        close = getattr(self.journal, "close", None)
        if callable(close):
            close()


Mk = Callable[[], FencedTranscriptsFixture]


def blob(tag: int) -> bytes:
    """The suite's blob: ``01 <tag> 2a``."""
    return bytes([0x01, tag, 0x2A])


def _rejected(outcome: Outcome[Any], what: str) -> None:
    require(not outcome.ok, f"{what} succeeded; the fence must refuse it")
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"{what} raised {outcome.error!r}, not LeaseHeldError",
    )


def _blob_is(
    pair: FencedTranscriptsFixture, ref: str, expected: bytes | None, when: str
) -> None:
    actual = pair.transcripts.get(ref)
    require(actual == expected, f"{when}: {ref} holds {actual!r}, not {expected!r}")


def _marker_declared(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        marker = getattr(pair.transcripts, "fenced_writes", None)
        require(
            has_fenced_writes(pair.transcripts),
            f"transcripts.fenced_writes is {marker!r}, not True",
        )


def _stale_put_rejected(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        stale = pair.journal.acquire(RUN, "writer-a")
        pair.transcripts.put(REF, blob(1), stale)
        pair.journal.release(stale)
        fresh = pair.journal.acquire(RUN, "writer-b")
        pair.transcripts.put(REF, blob(3), fresh)
        late = attempt(lambda: pair.transcripts.put(REF, blob(2), stale))
        _rejected(late, "a superseded owner's blob put")
        _blob_is(pair, REF, blob(3), "after the stale put")


def _stale_delete_rejected(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        stale = pair.journal.acquire(RUN, "writer-a")
        pair.transcripts.put(REF, blob(3), stale)
        pair.journal.release(stale)
        fresh = pair.journal.acquire(RUN, "writer-b")
        late = attempt(lambda: pair.transcripts.delete(REF, stale))
        _rejected(late, "a superseded owner's blob delete")
        _blob_is(pair, REF, blob(3), "after the stale delete")
        pair.transcripts.delete(REF, fresh)
        _blob_is(pair, REF, None, "after the holder's delete")
        again = attempt(lambda: pair.transcripts.delete(REF, fresh))
        require(again.ok, f"deleting a missing blob raised {again.error!r}")


def _run_match(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        foreign = pair.journal.acquire(OTHER_RUN, "foreign")
        pair.transcripts.put(REF, blob(1))
        cross = attempt(lambda: pair.transcripts.put(REF, blob(9), foreign))
        _rejected(cross, "a blob put under a foreign lease")
        gone = attempt(lambda: pair.transcripts.delete(REF, foreign))
        _rejected(gone, "a blob delete under a foreign lease")
        _blob_is(pair, REF, blob(1), "after the foreign-lease writes")
        own_ref = f"{OTHER_RUN}/ckpt/1"
        own = attempt(lambda: pair.transcripts.put(own_ref, blob(5), foreign))
        require(own.ok, f"the lease holder's put of its own run raised {own.error!r}")
        _blob_is(pair, own_ref, blob(5), "after the holder's own put")


def _unleased_passthrough(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        pair.transcripts.put(REF, blob(1))
        _blob_is(pair, REF, blob(1), "after an unleased put")
        refs = pair.transcripts.list_refs(RUN)
        require(REF in refs, f"list_refs({RUN!r}) is {refs}, missing {REF}")
        pair.transcripts.delete(REF)
        _blob_is(pair, REF, None, "after an unleased delete")
        again = attempt(lambda: pair.transcripts.delete(REF))
        require(again.ok, f"deleting a missing blob raised {again.error!r}")


BATCH_REFS: Final = ("fenced-run/ckpt/7", "fenced-run/p/latest", "fenced-run/w/7")


def batching(pair: FencedTranscriptsFixture) -> BatchTranscriptStore:
    """The twin as a batch store, or the check is not run (T11 is optional)."""
    blobs = pair.transcripts
    if has_batch_put(blobs):
        return cast(BatchTranscriptStore, blobs)
    not_run("the blob twin offers no put_many (an optional ability, T11)")
    raise AssertionError("not_run returns only by raising")


def _blobs_are(
    pair: FencedTranscriptsFixture, expected: dict[str, bytes | None], when: str
) -> None:
    for ref, value in expected.items():
        _blob_is(pair, ref, value, when)


def _batch_stale_refused(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        blobs = batching(pair)
        stale = pair.journal.acquire(RUN, "writer-a")
        blobs.put_many([(BATCH_REFS[0], blob(1)), (BATCH_REFS[1], blob(1))], stale)
        pair.journal.release(stale)
        fresh = pair.journal.acquire(RUN, "writer-b")
        blobs.put_many([(BATCH_REFS[0], blob(3))], fresh)
        before = {BATCH_REFS[0]: blob(3), BATCH_REFS[1]: blob(1), BATCH_REFS[2]: None}
        late = attempt(
            lambda: blobs.put_many([(ref, blob(2)) for ref in BATCH_REFS], stale)
        )
        _rejected(late, "a superseded owner's put_many")
        _blobs_are(pair, before, "after the stale batch (no blob of it may land)")
        own = attempt(
            lambda: blobs.put_many([(ref, blob(4)) for ref in BATCH_REFS], fresh)
        )
        require(own.ok, f"the holder's put_many raised {own.error!r}")
        _blobs_are(pair, dict.fromkeys(BATCH_REFS, blob(4)), "after the holder's batch")


def _batch_arguments(stores: Fresh[FencedTranscriptsFixture]) -> None:
    with stores() as pair:
        blobs = batching(pair)
        lease = pair.journal.acquire(RUN, "writer-a")
        blobs.put_many([(BATCH_REFS[0], blob(1))], lease)
        before = {BATCH_REFS[0]: blob(1), BATCH_REFS[1]: None, BATCH_REFS[2]: None}
        refused: list[tuple[str, object, type[Exception]]] = [
            ("a ref named twice",
             [(BATCH_REFS[1], blob(2)), (BATCH_REFS[1], blob(3))], InvalidArgumentError),
            ("refs of two runs",
             [(BATCH_REFS[1], blob(2)), (f"{OTHER_RUN}/x", blob(2))], LeaseHeldError),
            ("a last item that is not bytes",
             [(BATCH_REFS[1], blob(2)), (BATCH_REFS[2], "text")], InvalidArgumentError),
            ("a last item that is no pair",
             [(BATCH_REFS[1], blob(2)), (BATCH_REFS[2],)], InvalidArgumentError),
        ]  # fmt: skip
        for what, items, error in refused:
            outcome = attempt(partial(blobs.put_many, items, lease))  # type: ignore[arg-type]  # malformed on purpose
            require(
                isinstance(outcome.error, error),
                f"put_many with {what} raised {outcome.error!r}, not {error.__name__}",
            )
            _blobs_are(pair, before, f"after the refused batch with {what}")
        two_runs = attempt(
            lambda: blobs.put_many(
                [(BATCH_REFS[1], blob(2)), (f"{OTHER_RUN}/x", blob(2))]
            )
        )
        require(
            isinstance(two_runs.error, InvalidArgumentError),
            f"an unleased put_many over two runs raised {two_runs.error!r}, "
            "not InvalidArgumentError",
        )
        _blob_is(pair, f"{OTHER_RUN}/x", None, "after the refused two-run batch")
        empty = attempt(lambda: blobs.put_many([], lease))
        require(empty.ok, f"an empty put_many raised {empty.error!r}")
        _blobs_are(pair, before, "after an empty batch")


def fenced_transcripts_conformance(mk: Mk) -> ConformanceSuite:
    """Build the fenced-transcripts suite over ``mk`` (fresh journal + twin pairs)."""
    return _suite(each_fresh(mk))


@contextmanager
def _fresh_pair(certification: Certification) -> Iterator[FencedTranscriptsFixture]:
    with fresh_store(certification, CERTIFY_TTL_MS) as opened:
        yield FencedTranscriptsFixture(leasable(opened), opened.transcripts)


def fenced_transcripts_suite(certification: Certification) -> ConformanceSuite:
    """Build the fenced-transcripts suite over the certification's fresh locations."""
    return _suite(partial(_fresh_pair, certification))


def _suite(stores: Fresh[FencedTranscriptsFixture]) -> ConformanceSuite:
    table: list[
        tuple[str, str, tuple[str, ...], Callable[[Fresh[FencedTranscriptsFixture]], None]]
    ] = [
        ("fenced-transcripts-marker-declared", "the twin declares fenced_writes = True",
         ("T6", "F5"), _marker_declared),
        ("fenced-transcripts-stale-put-rejected", "a superseded owner's put is refused",
         ("T6", "T1", "L6"), _stale_put_rejected),
        ("fenced-transcripts-stale-delete-rejected",
         "a superseded owner's blob delete is refused", ("T6", "T2", "L6"),
         _stale_delete_rejected),
        ("fenced-transcripts-run-match", "a lease guards only blobs of its own run",
         ("T6", "F2", "T3"), _run_match),
        ("fenced-transcripts-unleased-passthrough", "blob calls without a lease work",
         ("T1", "T2", "T4", "F4"), _unleased_passthrough),
        ("fenced-transcripts-batch-stale-refused",
         "a superseded owner's put_many writes no blob of its batch",
         ("T11", "L6", "F3"), _batch_stale_refused),
        ("fenced-transcripts-batch-arguments",
         "a refused batch (bad item, duplicate ref, two runs) leaves every blob as it was",
         ("T11", "D14", "F2"), _batch_arguments),
    ]  # fmt: skip
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, stores))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("fenced-transcripts", checks)


SPEC: Final = SuiteSpec(
    "fenced-transcripts",
    fenced_transcripts_suite,
    "fenced_transcripts",
    True,
    "the fenced blob twin (8.6)",
)
