"""``shared_handle_conformance(certification)``: many threads through ONE handle.

One store instance must be safe to call from several threads (X7), however it
serves them: an instance lock, a pool, or group commit, where the writes of
many callers share one transaction and one durable commit. The other suites
write through one thread per handle, so a store that batches its callers is
never seen batching there. These checks make threads of one handle overlap on
purpose, then hold every call to its own outcome:

- ``shared-handle-own-outcomes``: threads of handle ``a`` mix good writes on
  their own runs (appends, meta, blobs) with writes the contract refuses (a
  repeated seq; a released or never-issued lease, on their own run and on
  others'). Every good write must succeed and every refused one raise its own
  error (``JournalOrderViolation``, ``LeaseHeldError``); read through another
  handle, each run must hold exactly its good writes. A store that checks the
  lease of one caller per batch, or lets one refusal fail or undo its
  batch-mates, fails here.
- ``shared-handle-takeover``: threads of handle ``a`` loop leased writes on a
  victim run (append, meta, blob) while other threads of ``a`` append to runs
  of their own; handle ``b`` takes the victim over at a random moment (the
  writers' clock lags, so only the epoch can stop them). No victim write that
  began after the takeover returned may have succeeded, the victim must read
  the same afterwards as right after the takeover, the successor's lease must
  be intact, and every bystander write must have succeeded and be stored.

Rounds are bounded by a count and a time budget, under a fast thread switch
interval so the threads interleave finely. ``StoreBusyError`` is contention,
never a verdict: such a call is tried again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import Background, fast_switching
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Outcome,
    attempt,
    build_check,
    require,
    same_json,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import (
    blob,
    blob_ref,
    entry,
    leasable,
    meta,
    prepare,
    require_capability,
    state_of,
)
from rulvar_conformance.suites._thread_loop import (
    WriteLoop,
    late_successes,
    race_rounds,
)
from rulvar_conformance.suites._windows import (
    WINDOW_TTL_MS,
    Handles,
    open_handles,
    successor_holds,
    take_over,
)
from rulvar_store import (
    JournalEntry,
    JournalOrderViolation,
    Lease,
    LeaseHeldError,
    OpenedStore,
    RunMeta,
    StoreBusyError,
    read_run_meta,
)
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "shared_handle_conformance"]

THREADS: Final = 6
STEPS: Final = 40
"""Calls per thread in ``shared-handle-own-outcomes``."""
BUSY_RETRIES: Final = 200
TAKEOVER_ROUNDS: Final = 60
MIN_TAKEOVER_ROUNDS: Final = 6
BUDGET_S: Final = 1.5
"""Takeover rounds stop after TAKEOVER_ROUNDS, or after BUDGET_S once MIN ran."""
BYSTANDERS: Final = 3
MAX_WRITES: Final = 200
THREAD_LIMIT_S: Final = 60.0
SHOWN: Final = 4
"""Wrong outcomes quoted in a failure message."""

Caps = frozenset[str]


def _retrying_busy(call: Callable[[], Any]) -> Outcome[Any]:
    outcome = attempt(call)
    for _ in range(BUSY_RETRIES):
        if not isinstance(outcome.error, StoreBusyError):
            break
        time.sleep(0.001)
        outcome = attempt(call)
    return outcome


@dataclass
class _MixedWriter:
    """One thread of ``shared-handle-own-outcomes`` and the model of its run.

    The model holds what the run must show at the end: the good writes only.
    """

    a: OpenedStore
    caps: Caps
    lease: Lease
    dead: list[Lease]
    number: int
    entries: list[JournalEntry] = field(default_factory=list)
    meta: RunMeta | None = None
    blob: bytes | None = None
    wrong: list[str] = field(default_factory=list)

    def expect(
        self, call: Callable[[], Any], error: type[Exception] | None, what: str
    ) -> bool:
        """Make ``call``; note it if ``error`` (``None``: success) is not what happened."""
        outcome = _retrying_busy(call)
        if error is None and not outcome.ok:
            self.wrong.append(f"{what}: expected success, observed {outcome.error!r}")
        elif error is not None and not isinstance(outcome.error, error):
            seen = "success" if outcome.ok else repr(outcome.error)
            self.wrong.append(f"{what}: expected {error.__name__}, observed {seen}")
        return outcome.ok

    def run(self, start: threading.Barrier) -> None:
        rng = random.Random(f"shared-handle-{self.number}")
        journal, blobs, run_id = self.a.journal, self.a.transcripts, self.lease.run_id
        by, seq = f"t{self.number}", 1  # prepare() stored seq 0
        start.wait()
        for step in range(STEPS):
            roll, tag = rng.random(), 1_000 * self.number + step
            if roll < 0.4:
                made = entry(seq, by, tag)
                call = partial(journal.append, run_id, made, self.lease)
                if self.expect(call, None, "a good append"):
                    self.entries.append(made)
                    seq += 1
            elif roll < 0.5:
                call = partial(
                    journal.append, run_id, entry(seq - 1, by, tag), self.lease
                )
                self.expect(
                    call, JournalOrderViolation, f"an append of seq {seq - 1} again"
                )
            elif roll < 0.65 and "fenced_writes" in self.caps:
                record = meta(run_id, by, tag)
                if self.expect(
                    partial(journal.put_meta, record, self.lease),
                    None,
                    "a good put_meta",
                ):
                    self.meta = record
            elif roll < 0.75 and "fenced_transcripts" in self.caps:
                data = blob(by, tag)
                call = partial(blobs.put, blob_ref(run_id), data, self.lease)
                if self.expect(call, None, "a good blob put"):
                    self.blob = data
            else:
                self.refused_write(rng, tag)

    def refused_write(self, rng: random.Random, tag: int) -> None:
        """A write with a dead lease of some run (its own or another thread's)."""
        stale = rng.choice(self.dead)
        target = stale.run_id
        writes: dict[str, Callable[[], Any]] = {
            "append": partial(
                self.a.journal.append, target, entry(10**6 + tag, "stale", tag), stale
            )
        }
        if "fenced_writes" in self.caps:
            writes["put_meta"] = partial(
                self.a.journal.put_meta, meta(target, "stale", tag), stale
            )
        if "fenced_transcripts" in self.caps:
            writes["blob put"] = partial(
                self.a.transcripts.put, blob_ref(target), blob("stale", tag), stale
            )
        kind = rng.choice(sorted(writes))
        what = f"a {kind} on {target!r} with a dead lease (epoch {stale.epoch})"
        self.expect(writes[kind], LeaseHeldError, what)

    def holds_exactly_its_good_writes(self, observer: OpenedStore) -> None:
        run_id = self.lease.run_id
        stored = observer.journal.load(run_id)
        require(
            same_json(stored, self.entries),
            f"expected run {run_id!r} to hold exactly its {len(self.entries)} good "
            f"appends in order, observed {len(stored)} entries (last keys "
            f"{[item.get('key') for item in stored[-4:]]}): a refused write landed "
            "or a good one was lost (X7, J6, L7)",
        )
        if "fenced_writes" in self.caps:
            seen = read_run_meta(observer.journal, run_id)
            require(
                same_json(seen, self.meta),
                f"expected run {run_id!r} to hold its last good meta {self.meta!r}, "
                f"observed {seen!r} (F1, X7)",
            )
        if "fenced_transcripts" in self.caps:
            data = observer.transcripts.get(blob_ref(run_id))
            require(
                data == self.blob,
                f"expected run {run_id!r} to hold its last good blob {self.blob!r}, "
                f"observed {data!r} (F3, X7)",
            )


def _dead_leases(a: OpenedStore, run_id: str) -> list[Lease]:
    """A released lease and one never issued, for a run whose live lease comes next."""
    store = leasable(a)
    released = store.acquire(run_id, "owner-old")
    store.release(released)
    return [released, Lease(run_id, "owner-a", released.epoch + 1_000)]


def _own_outcomes(locations: LocationFactory, caps: Caps) -> None:
    require_capability(caps, "fenced_writes")
    with at_fresh_location(locations, needs=("shared", "clock")) as site:
        h = open_handles(site)
        dead: list[Lease] = []
        writers: list[_MixedWriter] = []
        for number in range(THREADS):
            run_id = f"shared-handle-run-{number}"
            dead += _dead_leases(h.a, run_id)
            lease = leasable(h.a).acquire(run_id, f"owner-{number}")
            by = f"t{number}"
            prepare(h.a, lease, caps, by=by)
            writers.append(
                _MixedWriter(
                    h.a,
                    caps,
                    lease,
                    dead,
                    number,
                    [entry(0, by, 0)],
                    meta(run_id, by, 0),
                )
            )
            if "fenced_transcripts" in caps:
                writers[-1].blob = blob(by, 0)
        start = threading.Barrier(THREADS)
        with fast_switching():
            threads = [Background(partial(w.run, start)).start() for w in writers]
            for thread in threads:
                require(thread.wait(THREAD_LIMIT_S), "a writer thread never finished")
                require(
                    thread.outcome.ok, f"a writer crashed: {thread.outcome.error!r}"
                )
        wrong = [line for writer in writers for line in writer.wrong]
        require(
            not wrong,
            f"expected each of {THREADS} threads sharing one handle to get its own "
            f"outcome, observed {len(wrong)} wrong: " + "; ".join(wrong[:SHOWN]),
        )
        for writer in writers:
            writer.holds_exactly_its_good_writes(h.c)


def _loop(write: Callable[[int], None], stop: threading.Event) -> WriteLoop:
    """``write`` over and over until stopped; busy answers are tried again."""
    return WriteLoop(lambda tag: _retrying_busy(partial(write, tag)), MAX_WRITES, stop)


def _victim_writes(
    a: OpenedStore, caps: Caps, lease: Lease
) -> list[Callable[[int], None]]:
    """One writer per surface the store fences (distinct surfaces: no seq clashes)."""
    run_id = lease.run_id
    writes: list[Callable[[int], None]] = [
        lambda tag: a.journal.append(run_id, entry(tag, "a", tag), lease)
    ]
    if "fenced_writes" in caps:
        writes.append(lambda tag: a.journal.put_meta(meta(run_id, "a", tag), lease))
    if "fenced_transcripts" in caps:
        writes.append(
            lambda tag: a.transcripts.put(blob_ref(run_id), blob("a", tag), lease)
        )
    return writes


def _bystanders_wrote_everything(
    h: Handles, loops: list[WriteLoop], leases: list[Lease]
) -> None:
    for loop, lease in zip(loops, leases, strict=True):
        failed = next((o.error for _, o in loop.calls if not o.ok), None)
        require(
            failed is None,
            f"expected every append with the live lease of {lease.run_id!r}, made by "
            f"another thread of the same handle, to succeed, observed {failed!r} "
            "(X7)",
        )
        acknowledged = [entry(tag, "a", tag) for tag in range(1, len(loop.calls) + 1)]
        stored = h.c.journal.load(lease.run_id)
        require(
            same_json(stored, acknowledged),
            f"expected {lease.run_id!r} to hold its {len(acknowledged)} acknowledged "
            f"appends, observed {len(stored)} (X7, J2)",
        )


def _takeover_round(h: Handles, caps: Caps, round_no: int, rng: random.Random) -> None:
    victim = leasable(h.a).acquire(f"shared-victim-{round_no}", "owner-a")
    prepare(h.a, victim, caps)
    bystanders = [
        leasable(h.a).acquire(f"shared-bystander-{round_no}-{n}", "owner-a")
        for n in range(BYSTANDERS)
    ]
    # Expired for the world; handle a's clock lags, so its writers believe it live.
    h.clock.advance(3 * WINDOW_TTL_MS)
    stop = threading.Event()
    victims = [_loop(write, stop) for write in _victim_writes(h.a, caps, victim)]
    others = [
        _loop(partial(_bystander_append, h.a, lease), stop) for lease in bystanders
    ]
    threads = [Background(loop.run).start() for loop in victims + others]
    for loop in victims + others:
        require(loop.started.wait(THREAD_LIMIT_S), "a writer thread never started")
    time.sleep(rng.random() * 0.002)
    successor = take_over(h, victim.run_id)
    taken_at = time.perf_counter()
    seen = state_of(h.c, victim.run_id, caps)
    stop.set()
    for thread in threads:
        require(thread.wait(THREAD_LIMIT_S), "a writer thread never stopped")
    late = late_successes(victims, taken_at)
    require(
        not late,
        f"expected every write of the superseded lease that began after another "
        f"handle's takeover returned to be refused, observed {len(late)} succeed "
        f"while {BYSTANDERS} other threads of the same handle wrote (L6, L7, X7)",
    )
    after = state_of(h.c, victim.run_id, caps)
    require(
        after.same_as(seen),
        f"expected the victim run as read right after the takeover to stay, "
        f"observed a superseded write land later: {seen} became {after} (L7, X3)",
    )
    successor_holds(h, victim.run_id, successor, "after racing writers of one handle")
    _bystanders_wrote_everything(h, others, bystanders)


def _bystander_append(a: OpenedStore, lease: Lease, tag: int) -> None:
    a.journal.append(lease.run_id, entry(tag, "a", tag), lease)


def _takeover(locations: LocationFactory, caps: Caps) -> None:
    rng = random.Random("shared-handle-takeover")
    race_rounds(
        locations,
        TAKEOVER_ROUNDS,
        MIN_TAKEOVER_ROUNDS,
        BUDGET_S,
        lambda h, round_no: _takeover_round(h, caps, round_no, rng),
    )


def shared_handle_conformance(certification: Certification) -> ConformanceSuite:
    """Build the shared-handle suite over fresh shared locations with a clock (X7)."""
    locations, capabilities = certification.locations, certification.capabilities
    return ConformanceSuite(
        "shared-handle",
        (
            build_check(
                "shared-handle-own-outcomes",
                f"{THREADS} threads of one handle mixing good and refused writes each "
                "get their own outcome, and only the good writes are stored",
                ("X7", "J6", "J7", "L6", "F1", "F3"),
                partial(_own_outcomes, locations, capabilities),
            ),
            build_check(
                "shared-handle-takeover",
                "a takeover racing writers of one handle never lets a superseded "
                "write land, and the handle's other threads still write",
                ("X3", "L7", "L6", "X7"),
                partial(_takeover, locations, capabilities),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "shared-handle",
    shared_handle_conformance,
    "leases",
    True,
    "threads of ONE handle (batched or not): own outcomes, takeover races",
)
