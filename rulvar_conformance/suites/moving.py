"""``moving_conformance(locations)``: copies and moves out of and into the store (V1-V6, V12).

A copy (``rulvar_store.ops.copy_run``) runs on the SPI plus the store's optional
row abilities (``entry_rows``, ``write_rows``, ``fence_moved``, ...). These
checks move runs between two fresh locations of the store under test, so a
backend whose abilities lose an epoch, write a tombstone that can be outlived
or page its rows wrongly fails here:

- ``move-epoch-carried``: after a copy the destination's next epoch is above
  every epoch the source granted, and the records arrived equal (V1, V2).
- ``move-source-fenced``: after a move the source refuses every acquire with
  ``RunMovedError`` naming the destination, an earlier owner's writes are
  refused at both ends, and the tombstone is a lease row that never expires
  (V3, V4). Needs ``fence_moved``; otherwise not run.
- ``move-interrupted-resumed``: a copy interrupted after its first write to the
  destination, then run again, leaves every record there exactly once (V6).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import expect_refused, leasable
from rulvar_store import Lease, OpenedStore
from rulvar_store.backend import (
    NEVER_EXPIRES_MS,
    LocationFactory,
    dump_record,
    moved_owner,
)
from rulvar_store.errors import RunMovedError
from rulvar_store.ops import (
    copy_run,
    copy_runs,
    has_lease_peek,
    has_run_rows_writer,
    verify_run,
)

__all__ = ["SPEC", "moving_conformance"]

RUN: Final = "move-run"
DESTINATION: Final = "kit://moved-here"
LONG_RUN: Final = 2_500
"""Entries of the interrupted copy over row abilities: more than one page (2 000)."""


def _fill(opened: OpenedStore, entries: int = 3, run_id: str = RUN) -> None:
    journal: Any = opened.journal
    lease = journal.acquire(run_id, "kit-writer")
    records = [
        {"seq": seq, "kind": "kit", "n": [seq, "é"]} for seq in range(1, entries + 1)
    ]
    if has_run_rows_writer(journal):  # one transaction where the store offers it
        texts = [dump_record(record) for record in records]
        journal.write_rows(
            run_id, lease, expected_entries=0, entries=texts, meta=None, epoch=0
        )
    else:
        for record in records:
            journal.append(run_id, record, lease)
    journal.put_meta({"runId": run_id, "status": "running", "kitKey": {"x": 1}}, lease)
    opened.transcripts.put(f"{run_id}/ckpt/1", b"\x00one", lease)
    journal.release(lease)


def _epoch_carried(locations: LocationFactory) -> None:
    with (
        at_fresh_location(locations) as source_site,
        at_fresh_location(locations) as destination_site,
    ):
        source, destination = source_site.open(), destination_site.open()
        for _ in range(4):  # the source's counter climbs past the destination's
            leasable(source).release(leasable(source).acquire(RUN, "earlier"))
        _fill(source)
        outcome = copy_run(source, destination, RUN)
        require(outcome.action == "copied", f"the copy did not happen: {outcome}")
        problems = verify_run(source, destination, RUN)
        require(not problems, f"the copy differs from the source: {problems} (V1)")
        after_source = leasable(source).acquire(RUN, "probe")
        leasable(source).release(after_source)
        at_destination = leasable(destination).acquire(RUN, "probe")
        require(
            at_destination.epoch > after_source.epoch,
            f"the destination granted epoch {at_destination.epoch}, not above the "
            f"source's {after_source.epoch - 1} (the epoch was not carried, V2)",
        )
        # Many runs at once: a store offering write_runs takes them grouped.
        others = [f"{RUN}-{n}" for n in range(3)]
        for other in others:
            _fill(source, run_id=other)
            leasable(source).release(leasable(source).acquire(other, "earlier"))
        outcomes = list(copy_runs(source, destination, others))
        require(
            [o.action for o in outcomes] == ["copied"] * 3,
            f"copying three runs at once gave {outcomes}",
        )
        for other in others:
            problems = verify_run(source, destination, other)
            require(
                not problems, f"{other} differs after a grouped copy: {problems} (V1)"
            )
            here = leasable(source).acquire(other, "probe")
            there = leasable(destination).acquire(other, "probe")
            require(
                there.epoch > here.epoch,
                f"{other}: the destination granted epoch {there.epoch}, not above the "
                f"source's {here.epoch - 1} after a grouped copy (V2)",
            )


def _source_fenced(locations: LocationFactory) -> None:
    with (
        at_fresh_location(locations) as source_site,
        at_fresh_location(locations) as destination_site,
    ):
        source, destination = source_site.open(), destination_site.open()
        if not has_run_rows_writer(source.journal):
            not_run("the store cannot write a moved-run tombstone (no fence_moved)")
        _fill(source)
        earlier = leasable(source).acquire(RUN, "earlier-owner")
        source.journal.append(RUN, {"seq": 10, "kind": "kit"}, earlier)
        leasable(source).release(earlier)
        outcome = copy_run(
            source, destination, RUN, move=True, destination_name=DESTINATION
        )
        require(outcome.action == "moved", f"the move did not happen: {outcome}")
        refused = attempt(partial(leasable(source).acquire, RUN, "late"))
        require(
            isinstance(refused.error, RunMovedError)
            and refused.error.destination == DESTINATION,
            f"an acquire at the moved run's source gave {refused.error or refused.value!r}, "
            f"not RunMovedError naming {DESTINATION} (V4)",
        )
        stale = Lease(RUN, earlier.owner, earlier.epoch)
        expect_refused(
            attempt(partial(source.journal.append, RUN, {"seq": 11}, stale)),
            "an earlier owner's append at the source after the move (V4)",
        )
        expect_refused(
            attempt(partial(destination.journal.append, RUN, {"seq": 11}, stale)),
            "an earlier owner's append at the destination (V2)",
        )
        if has_lease_peek(source.journal):
            row = source.journal.peek_lease(RUN)
            require(
                row is not None
                and row.owner == moved_owner(DESTINATION)
                and row.expires_at == NEVER_EXPIRES_MS,
                f"the tombstone row is {row}, not owner {moved_owner(DESTINATION)!r} "
                f"expiring at {NEVER_EXPIRES_MS} (V3)",
            )
        fresh = leasable(destination).acquire(RUN, "new-owner")
        require(
            fresh.epoch > earlier.epoch + 1,
            f"the destination granted epoch {fresh.epoch}, not above the source's "
            "tombstone (V3)",
        )


class _Interrupted(Exception):
    """The kit's stand-in for a crash of the copying process."""


class _Interrupting:
    """The destination's journal, failing every write after the first ``allowed``."""

    def __init__(self, journal: Any, allowed: int) -> None:
        self._journal = journal
        self._left = allowed

    def _count(self) -> None:
        if self._left <= 0:
            raise _Interrupted
        self._left -= 1

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        return self._journal.append(*args, **kwargs)

    def write_rows(self, *args: Any, **kwargs: Any) -> Any:
        self._count()
        return self._journal.write_rows(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


class _Pair:
    def __init__(self, journal: Any, transcripts: Any) -> None:
        self.journal = journal
        self.transcripts = transcripts


def _interrupted_resumed(locations: LocationFactory) -> None:
    with (
        at_fresh_location(locations) as source_site,
        at_fresh_location(locations) as destination_site,
    ):
        source, destination = source_site.open(), destination_site.open()
        # Pages matter only where rows are read by page; through the SPI alone
        # (one append per entry) a short run shows the same resume.
        entries = LONG_RUN if has_run_rows_writer(source.journal) else 50
        _fill(source, entries)
        cut = _Pair(_Interrupting(destination.journal, 1), destination.transcripts)
        interrupted = attempt(partial(copy_run, source, cut, RUN))
        require(
            isinstance(interrupted.error, _Interrupted),
            f"the kit could not interrupt the copy: {interrupted.error or interrupted.value!r}",
        )
        landed = len(destination.journal.load(RUN))
        outcome = copy_run(source, destination, RUN)
        require(
            outcome.action == "copied", f"the resumed copy did not finish: {outcome}"
        )
        count = len(destination.journal.load(RUN))
        problems = verify_run(source, destination, RUN)
        require(
            count == entries and not problems,
            f"after an interruption ({landed} entries had landed) and a second copy "
            f"the destination holds {count} of {entries} entries: {problems} (V6)",
        )


_CHECKS: Final = (
    (
        "move-epoch-carried",
        "a copy carries the records and raises the destination's epoch above the source's",
        ("V1", "V2", "V12"),
        _epoch_carried,
    ),
    (
        "move-source-fenced",
        "after a move the source refuses every acquire, typed, and every earlier owner",
        ("V3", "V4", "V12"),
        _source_fenced,
    ),
    (
        "move-interrupted-resumed",
        "a copy interrupted part way and run again leaves every record exactly once",
        ("V6", "V12"),
        _interrupted_resumed,
    ),
)


def moving_conformance(certification: Certification) -> ConformanceSuite:
    """The copy and move checks between two fresh locations of the store."""
    locations = certification.locations
    return ConformanceSuite(
        "moving",
        tuple(
            build_check(check_id, title, clauses, partial(body, locations))
            for check_id, title, clauses, body in _CHECKS
        ),
    )


SPEC: Final = SuiteSpec(
    "moving",
    moving_conformance,
    "leases",
    True,
    "copies and moves between two locations: epochs carried, source fenced, resumed (V1-V6)",
)
