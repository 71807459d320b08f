"""``durability_conformance(locations)``: an acknowledged write outlives its process (X8).

Visibility is checked everywhere else; these checks ask whether what a store
acknowledged is still there after the process that heard the acknowledgement
died.

- ``durability-setting``: a store whose durability rests on a database setting
  reports it (``rulvar_store.backend.ReportsDurability``: SQLite's
  ``synchronous``, PostgreSQL's ``synchronous_commit``, read back from the live
  session), and what the session runs must be what the store declares. Not
  run for a store that reports none.
- ``ack-survives-sigkill``: a spawned child opens ONE handle and has
  ``WRITERS`` threads append through it at once (so a store that batches is
  examined while it batches), each sending an acknowledgement to the parent as
  soon as its append returned. After ``ARM_AT`` acknowledgements every
  ``before-commit`` failpoint waits ``SLOW_COMMIT_S`` (a COMMIT that is slow to
  come), and the first acknowledgement of an append called after that
  SIGKILLs the child on the spot. The
  parent reopens the location: every acknowledged append must be there, and
  each run a gap-free prefix of its appends. A group commit that acknowledges
  its callers before its COMMIT returned is caught every time: its callers
  acknowledge while their leader waits before COMMIT, and the kill lands
  first. A store without failpoints is killed at its first acknowledgement
  after ``ARM_AT`` all the same.
- ``blob-ack-survives-sigkill``: the same with blob-only batches: each thread
  stores its blobs through ``put_many`` (``put`` without it), so a batch that
  carries blobs and no journal write is examined on its own.
- ``close-keeps-acknowledged``: the writers append while the child's main
  thread closes the handle under them (Y7), at a moment a batch is held in
  its COMMIT with a write queued behind it: a write the store acknowledged
  must be stored, one it refused must raise a typed ``RulvarError``; right
  after ``close()`` returned the child is SIGKILLed and the parent reads the
  location. A close that drops what is queued and answers it done loses
  acknowledged writes.

Default: each row takes a few seconds (the SIGKILL lands within one slowed
COMMIT). The operating system's half (power loss) is the faults suites' business.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from functools import partial
from typing import Any, Final, Literal

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.processes import stream_spawned
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_store import OpenedStore, has_batch_put
from rulvar_store.backend import (
    Failpoint,
    LocationFactory,
    StoreLocation,
    reports_durability,
    set_failpoint_hook,
)
from rulvar_store.errors import RulvarError

__all__ = ["SPEC", "durability_conformance"]

WRITERS: Final = 6
STEPS: Final = 400
"""Appends per writer at most; the child is killed long before."""
ARM_AT: Final = 30
"""Acknowledgements before the kill is armed (batches are in full swing then)."""
SLOW_COMMIT_S: Final = 0.25
"""How long each ``before-commit`` waits once armed: an early acknowledgement
reaches the parent and kills the child within it, on any machine that runs a
woken thread within a quarter of a second."""
CHILD_LIMIT_S: Final = 120.0
PARENT_POLL_S: Final = 0.2


CLOSE_AT: Final = 12
"""Acknowledgements before the close row's main thread closes the handle."""
CLOSE_JOIN_S: Final = 5.0
"""How long the close row's child waits for its writers after close returned."""

Mode = Literal["append", "blobs", "close"]


def _run_of(writer: int) -> str:
    return f"ack-run-{writer}"


def _blob_ref(writer: int, seq: int) -> str:
    return f"{_run_of(writer)}/b/{seq:06d}"


def _write(opened: OpenedStore, mode: Mode, number: int, seq: int) -> None:
    """One acknowledged write of writer ``number``: an append, or a blob-only batch."""
    if mode != "blobs":
        opened.journal.append(
            _run_of(number), {"kind": "step", "seq": seq, "writer": number}
        )
        return
    blob = f"{number}:{seq}".encode()
    blobs: Any = opened.transcripts  # put_many is an optional method (T11)
    if has_batch_put(blobs):
        blobs.put_many([(_blob_ref(number, seq), blob)])
    else:
        opened.transcripts.put(_blob_ref(number, seq), blob)


def _acknowledging_child(
    location: StoreLocation, parent: int, mode: Mode, send: Any
) -> None:
    """In the spawned child: WRITERS threads of one handle write and acknowledge.

    Sends ``("ack", writer, seq)`` per returned write, ``("error", text)`` if a
    writer fails; the process SIGKILLs itself at the first acknowledgement after
    the kill was armed (``close``: right after its main thread closed the
    handle under the writers, whose typed refusals end them quietly).
    """
    report = threading.Lock()
    armed = threading.Event()
    acknowledged = [0]
    closing = threading.Event()

    commit_held = threading.Event()  # the close row: a batch waits in its COMMIT
    latecomer_called = threading.Event()
    queued_behind = threading.Event()

    def slow_commit(operation: str, point: Failpoint) -> None:
        if point != "before-commit" or not armed.is_set():
            return
        if mode != "close" or commit_held.is_set():
            time.sleep(SLOW_COMMIT_S)
            return
        # The close row: this batch took all it will take; hold its COMMIT until
        # the latecomer's write is queued behind it, let the main thread close
        # meanwhile, then commit.
        commit_held.set()
        latecomer_called.wait(4 * SLOW_COMMIT_S)
        time.sleep(SLOW_COMMIT_S / 5)  # from its call to its place in the queue
        queued_behind.set()
        time.sleep(SLOW_COMMIT_S)

    threading.Thread(target=_die_with_parent, args=(parent,), daemon=True).start()
    try:
        opened = location.open()
    except Exception as exc:
        send.send(("error", f"open failed: {type(exc).__name__}: {exc}"))
        return
    set_failpoint_hook(slow_commit)

    def writer(number: int) -> None:
        for seq in range(1, STEPS + 1):
            # Only a write called once the kill is armed may trigger it: its
            # batch's before-commit comes after the arming, so it is slowed.
            trigger = armed.is_set() and mode != "close"
            try:
                _write(opened, mode, number, seq)
            except RulvarError:
                if closing.is_set():
                    return  # refused, typed, by the closed handle: never acknowledged
                raise
            except Exception as exc:
                with report:
                    send.send(
                        ("error", f"writer {number}: {type(exc).__name__}: {exc}")
                    )
                return
            with report:
                send.send(("ack", number, seq))
                acknowledged[0] += 1
                if trigger:
                    os.kill(os.getpid(), signal.SIGKILL)
                if acknowledged[0] >= (CLOSE_AT if mode == "close" else ARM_AT):
                    armed.set()

    threads = [
        threading.Thread(target=writer, args=(number,), daemon=True)
        for number in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + CHILD_LIMIT_S  # one bound for all: a hung store
    if mode == "close" and armed.wait(CHILD_LIMIT_S):

        def latecomer() -> None:
            # One write called once a batch holds its COMMIT: queued behind it.
            if not commit_held.wait(8 * SLOW_COMMIT_S):
                return  # no failpoint holds a COMMIT: nothing to queue behind
            latecomer_called.set()
            try:
                _write(opened, mode, WRITERS, 1)
            except RulvarError:
                return  # refused, typed, by the closing handle
            with report:
                send.send(("ack", WRITERS, 1))

        late = threading.Thread(target=latecomer, daemon=True)
        late.start()
        threads.append(late)
        # A store without failpoints is closed at once; others once the
        # latecomer's write is queued behind a batch that is committing.
        queued_behind.wait(8 * SLOW_COMMIT_S)
        closing.set()
        opened.close()  # under the writers: queued writes, a batch in flight
        # What close answered is what they report; a writer still waiting after
        # CLOSE_JOIN_S is left to the kill (a hang after close is X7's business).
        ends = min(deadline, time.monotonic() + CLOSE_JOIN_S)
        for thread in threads:
            thread.join(max(0.0, ends - time.monotonic()))
        os.kill(os.getpid(), signal.SIGKILL)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with report:
        send.send(("done",))


def _die_with_parent(parent: int) -> None:
    """End the child once ``parent`` is gone (a check abandoned at its deadline
    by a command that then exits must not leave a child behind, holding the
    command's output pipes open). The pid comes from the parent: it may be gone
    before the child has even started."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)


def _acknowledgements(
    location: StoreLocation, mode: Mode = "append"
) -> tuple[dict[int, set[int]], int | None]:
    """Run the child; return what it acknowledged per writer and its exit code."""
    acked: dict[int, set[int]] = {}
    errors: list[str] = []

    def heard(message: Any) -> bool:
        if message[0] == "ack":
            acked.setdefault(int(message[1]), set()).add(int(message[2]))
            return True
        if message[0] == "error":
            errors.append(str(message[1]))
        return False

    code = stream_spawned(
        _acknowledging_child, (location, os.getpid(), mode), CHILD_LIMIT_S, heard
    )
    require(not errors, f"the child's writer failed: {'; '.join(errors)}")
    return acked, code


def _stored(reader: OpenedStore, mode: Mode, number: int, seqs: set[int]) -> list[int]:
    """Writer ``number``'s writes found by ``reader``, in seq order."""
    if mode == "blobs":
        return sorted(
            seq
            for seq in range(1, max(seqs, default=0) + STEPS)
            if reader.transcripts.get(_blob_ref(number, seq)) is not None
        )
    return [int(item["seq"]) for item in reader.journal.load(_run_of(number))]


def _acked_writes_survive(locations: LocationFactory, mode: Mode) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        acked, code = _acknowledgements(site.location, mode)
        if not acked and code not in (None, -signal.SIGKILL):
            not_run(
                f"a spawned child process exited (code {code}) without acknowledging; "
                "the calling program's main module must be importable and guard its "
                "entry point with if __name__ == '__main__'"
            )
        after = "closed its handle under the writers" if mode == "close" else ""
        require(
            code == -signal.SIGKILL,
            f"expected the child killed by SIGKILL after {ARM_AT} acknowledgements"
            f"{' and a close' if after else ''}, observed exit code {code} with "
            f"{sum(map(len, acked.values()))}",
        )
        reader = site.open()
        lost: list[str] = []
        gaps: list[str] = []
        what = {"append": "appends", "blobs": "blob-only batches", "close": "appends"}
        for number, seqs in sorted(acked.items()):
            stored = _stored(reader, mode, number, seqs)
            missing = sorted(seqs - set(stored))
            if missing:
                lost.append(f"writer {number} seqs {missing[:5]}")
            if mode != "blobs" and stored != list(range(1, len(stored) + 1)):
                gaps.append(f"run {_run_of(number)}: {stored[:12]}")
        # Lost acknowledged writes are named first: a gap is often their trace
        # (a later write of the same writer landed), and which of the two shows
        # must not depend on the race that made the gap.
        require(
            not lost,
            f"acknowledged {what[mode]} missing after the writing process was "
            + (
                "closed under its writers and SIGKILLed (close answered writes it "
                "dropped, Y7): "
                if mode == "close"
                else "SIGKILLed (acknowledged before they were durable, X8): "
            )
            + "; ".join(lost),
        )
        require(
            not gaps,
            "a run after the kill is not a gap-free prefix of its appends: "
            + "; ".join(gaps),
        )


def _durability_setting(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        journal: Any = site.open().journal
        if not reports_durability(journal):
            not_run(
                "the store reports no durability setting "
                "(rulvar_store.backend.ReportsDurability)"
            )
        report = journal.durability()
        require(
            str(report.observed).lower() == str(report.declared).lower(),
            f"the store declares {report.setting}={report.declared} but its session "
            f"runs {report.setting}={report.observed} (X8)",
        )


def durability_conformance(certification: Certification) -> ConformanceSuite:
    """The X8 checks over fresh locations."""
    locations = certification.locations
    return ConformanceSuite(
        "durability",
        (
            build_check(
                "durability-setting",
                "the durability setting the session runs is the one the store declares",
                ("X8",),
                partial(_durability_setting, locations),
            ),
            build_check(
                "ack-survives-sigkill",
                "threads of one handle append; SIGKILL right after acknowledgements; "
                "every acknowledged append survives",
                ("X8", "J3"),
                partial(_acked_writes_survive, locations, "append"),
            ),
            build_check(
                "blob-ack-survives-sigkill",
                "threads of one handle store blob-only batches; SIGKILL right after "
                "acknowledgements; every acknowledged blob survives",
                ("X8", "T11"),
                partial(_acked_writes_survive, locations, "blobs"),
            ),
            build_check(
                "close-keeps-acknowledged",
                "close() under writing threads, then SIGKILL: every write close "
                "let through as done survives, the rest were refused typed",
                ("X8", "Y7"),
                partial(_acked_writes_survive, locations, "close"),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "durability",
    durability_conformance,
    None,
    True,
    "acknowledged writes (appends, blob-only batches, writes at close) survive "
    "SIGKILL; the declared durability runs (X8, Y7)",
)
