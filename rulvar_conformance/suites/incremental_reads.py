"""``incremental_reads_conformance(locations)``: ``load_since`` under concurrency and across lifetimes (X10).

An observer polls a live run with ``load_since`` (``rulvar_store._incremental``):
concatenating what successive calls return, starting over on ``restarted``,
must always give exactly what ``load`` returns. Two ways that breaks:

- ``load-since-concurrent-appends``: two other handles append to the run
  while a third polls it (the writers start after its first poll and go
  on until ``MIN_POLLS`` polls overlapped them). A cursor taken from
  anything but the last entry actually returned (the journal's length read after the entries, an id handed
  out before its commit) skips an entry appended in between; one taken from
  before the entries returns one twice. Every entry must arrive exactly once,
  in ``load``'s order, and no poll may claim a restart.
- ``load-since-across-incarnations``: a cursor issued before the run was
  deleted and created again (with more entries than before, then fewer) must
  never return the new incarnation's entries as new: it reports ``restarted``
  with the new journal whole, never skips its first entries, and the cursor
  it hands back continues the new incarnation.

- ``load-since-in-flight-append``: an append stands between its write and
  its COMMIT (a failpoint) while another handle's append to another run commits
  (ids issued at INSERT, not at COMMIT: the other's is higher) and the observer
  polls. The poll after the in-flight append committed must return it: a
  cursor taken from anything past the run's last returned entry (the table's
  highest id) skips it for good. Not run for a store without failpoints.

A store without ``load_since`` does not run these checks.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import Background, installed
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
    run_concurrently,
)
from rulvar_conformance.harness.site import Site, at_fresh_location
from rulvar_conformance.harness.stopping import REACH_LIMIT_S, StopAt, reached_or_done
from rulvar_conformance.harness.surfaces import entry
from rulvar_store import JournalEntry, OpenedStore, has_incremental_read

__all__ = ["SPEC", "incremental_reads_conformance"]

RUN: Final = "incremental-run"
WRITERS: Final = 2
APPENDS: Final = 60
"""Appends per writer in ``load-since-concurrent-appends``, at least."""
MIN_POLLS: Final = 40
"""Polls that must overlap the appends (the writers go on until then)."""
BESIDE_WAIT_S: Final = 1.0
"""How long the other run's append gets to commit while the first is held."""
MAX_APPENDS: Final = 20_000
"""Appends per writer at most (a bound if the poller stalls)."""
POLL_PAUSE_S: Final = 0.001
"""Between polls, so the poller leaves the writers the interpreter."""


def _keys(entries: list[JournalEntry]) -> list[Any]:
    return [item.get("key") for item in entries]


def _reader(site: Site) -> Any:
    journal: Any = site.open().journal
    if not has_incremental_read(journal):
        not_run("the store has no load_since (rulvar_store.IncrementalReadStore)")
    return journal


def _others(site: Site, count: int) -> list[OpenedStore]:
    """``count`` more handles, or the first one again on an unshared location."""
    if site.location.shared:
        return [site.open() for _ in range(count)]
    not_run("needs a second handle on the same location")
    return []


def _concurrent_appends(locations: Any) -> None:
    with at_fresh_location(locations) as site:
        reader = _reader(site)
        writers = _others(site, WRITERS)
        done = threading.Event()
        # The writers start once a poll has returned: writers that got the
        # interpreter first could otherwise reach MAX_APPENDS before the poller
        # ran at all, and the check would pass with no poll overlapping them.
        polling = threading.Event()
        polls = [0]
        counts = [0] * WRITERS
        collected: list[JournalEntry] = []
        problems: list[str] = []

        def poll() -> None:
            cursor: str | None = None
            while True:  # bounded by run_concurrently's timeout
                finished = done.is_set()
                tail = reader.load_since(RUN, cursor)
                if tail.restarted:
                    problems.append(f"a poll claimed a restart after {len(collected)}")
                    collected.clear()
                collected.extend(tail.entries)
                cursor = tail.cursor
                polls[0] += 1
                polling.set()
                if finished:
                    return
                time.sleep(POLL_PAUSE_S)

        def write(number: int) -> None:
            # At least APPENDS each, and on until the poller has polled MIN_POLLS
            # times while they ran: every poll overlaps appends, however the
            # machine schedules the threads.
            tag = 0
            polling.wait(REACH_LIMIT_S)
            ends = time.monotonic() + REACH_LIMIT_S
            while tag < APPENDS or (
                polls[0] < MIN_POLLS and tag < MAX_APPENDS and time.monotonic() < ends
            ):
                writers[number].journal.append(RUN, entry(None, f"w{number}", tag))
                tag += 1
            counts[number] = tag

        def writers_then_done() -> None:
            try:
                run_concurrently([partial(write, n) for n in range(WRITERS)])
            finally:
                done.set()

        outcomes = run_concurrently([poll, writers_then_done])
        for outcome in outcomes:
            require(outcome.ok, f"a poller or writer failed: {outcome.error!r}")
        stored = _keys(reader.load(RUN))
        seen = _keys(collected)
        require(not problems, "; ".join(problems) + " (nothing was deleted, X10)")
        require(
            len(stored) == sum(counts),
            f"expected {sum(counts)} stored entries, observed {len(stored)}",
        )
        twice = sorted(key for key, n in Counter(seen).items() if n > 1)[:5]
        polled = set(seen)
        missing = [key for key in stored if key not in polled][:5]
        require(
            seen == stored,
            f"the polls' entries differ from load's while other handles appended "
            f"(X10): {len(seen)} polled vs {len(stored)} stored, skipped {missing}, "
            f"returned twice {twice}",
        )


def _incarnations(locations: Any) -> None:
    with at_fresh_location(locations) as site:
        reader = _reader(site)
        (writer,) = _others(site, 1)
        journal = writer.journal
        for tag in (1, 2):
            journal.append(RUN, entry(None, "old", tag))
        old = reader.load_since(RUN)
        require(_keys(old.entries) == ["old-1", "old-2"], "the first poll is wrong")
        _recreate(journal, "new", 4)
        _starts_over(reader, old.cursor, ["new-1", "new-2", "new-3", "new-4"], "more")
        before = reader.load_since(RUN)  # a cursor after all four new entries
        _recreate(journal, "newer", 1)
        _starts_over(reader, before.cursor, ["newer-1"], "fewer")
        journal.delete(RUN)
        gone = reader.load_since(RUN, before.cursor)
        require(
            gone.entries == [],
            f"an old cursor of a deleted run returned {_keys(gone.entries)}",
        )


def _recreate(journal: Any, by: str, count: int) -> None:
    journal.delete(RUN)
    for tag in range(1, count + 1):
        journal.append(RUN, entry(None, by, tag))


def _starts_over(reader: Any, cursor: str, expected: list[str], size: str) -> None:
    """An old incarnation's cursor: restarted with the whole new journal, then on."""
    tail = reader.load_since(RUN, cursor)
    what = f"a cursor issued before delete and re-creation with {size} entries"
    require(
        tail.restarted,
        f"{what} returned {_keys(tail.entries)} as new, without restarted (X10)",
    )
    require(
        _keys(tail.entries) == expected,
        f"{what}: expected the whole new journal {expected}, observed "
        f"{_keys(tail.entries)} (X10)",
    )
    after = reader.load_since(RUN, tail.cursor)
    require(
        after.entries == [] and not after.restarted,
        f"{what}: the cursor it handed back did not continue the new incarnation "
        f"(next poll {_keys(after.entries)}, restarted={after.restarted})",
    )


def _in_flight_append(locations: Any) -> None:
    with at_fresh_location(locations) as site:
        reader = _reader(site)
        writer, other = _others(site, 2)
        run, beside = "in-flight-run", "in-flight-beside"
        writer.journal.append(run, entry(1, "writer", 1))
        tail = reader.load_since(run, None)
        seen, cursor, restarts = _keys(tail.entries), tail.cursor, int(tail.restarted)
        stop = StopAt({"before-commit"})
        with installed(stop):

            def in_flight() -> None:
                stop.aim()
                writer.journal.append(run, entry(2, "writer", 2))

            held = Background(in_flight).start()
            if not reached_or_done(stop, held):
                held.wait(REACH_LIMIT_S)
                not_run(
                    "the store never calls rulvar_store.backend.hit (no before-commit failpoint to hold an append at)"
                )
            # Another run's append commits meanwhile where the store lets it (a
            # store that serializes every write holds it until the release).
            beside_append = Background(
                partial(other.journal.append, beside, entry(1, "other", 1))
            ).start()
            beside_append.wait(BESIDE_WAIT_S)
            tail = reader.load_since(run, cursor)
            seen, cursor = seen + _keys(tail.entries), tail.cursor
            restarts += int(tail.restarted)
            stop.go.set()
            require(held.wait(REACH_LIMIT_S), "the held append never ended")
            require(
                beside_append.wait(REACH_LIMIT_S), "the other run's append never ended"
            )
        require(held.outcome.ok, f"the held append failed: {held.outcome}")
        tail = reader.load_since(run, cursor)
        seen += _keys(tail.entries)
        restarts += int(tail.restarted)
        stored = _keys(reader.load(run))
        require(
            restarts == 0,
            "load_since claimed a restart though nothing was deleted (a cursor from "
            "another run's row, X10)",
        )
        require(
            seen == stored,
            f"polling load_since returned {seen} where load returns {stored}: an "
            "append in flight while another run's higher id committed was skipped "
            "(X10: the cursor is the run's last returned entry, not the table's "
            "highest id)",
        )


def incremental_reads_conformance(certification: Certification) -> ConformanceSuite:
    """The X10 checks over fresh locations."""
    locations = certification.locations
    return ConformanceSuite(
        "incremental-reads",
        (
            build_check(
                "load-since-concurrent-appends",
                "polling load_since while other handles append returns every entry "
                "once, in load's order",
                ("X10", "J2"),
                partial(_concurrent_appends, locations),
            ),
            build_check(
                "load-since-across-incarnations",
                "an old cursor after delete and re-creation restarts with the whole "
                "new journal, never returns it as new, never skips",
                ("X10", "M6"),
                partial(_incarnations, locations),
            ),
            build_check(
                "load-since-in-flight-append",
                "an append in flight while another run's append commits is not "
                "skipped by the next poll",
                ("X10",),
                partial(_in_flight_append, locations),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "incremental-reads",
    incremental_reads_conformance,
    None,
    True,
    "load_since while others append and across delete/re-creation (X10)",
)
