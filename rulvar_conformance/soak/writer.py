"""The soak writer (CONTRACT 10.1, S1-S6): tenures over shared runs, every fenced surface.

``run_soak_writer`` drives one writer over an open store pair until ``hooks.stop()``
says so. Run it in-process over a fake (the referee's self-tests, S12) or as a real
process with ``python -m rulvar_conformance.soak.writer``, which reads its
``SoakWriterConfig`` from ``RULVAR_SOAK_CONFIG``, opens the pickled location BARE
(so concurrent boot is under test) and logs to its own JSONL report.

Beyond S3: several runs are shared; a holder may delete its run (the next tenure
re-creates it, so epochs must keep rising across the delete, L5); the stale sweep
probes with the lease that just died and with one older dead lease of the same
run; a call whose outcome the writer cannot know (the connection dropped) is
logged ``unknown`` and ends the tenure without a sweep, because the lease may
still be live.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

from rulvar_conformance.harness.processes import load_location
from rulvar_conformance.soak import probes
from rulvar_conformance.soak.companions import start_companions, stop_companions
from rulvar_conformance.soak.config import (
    AIM_HOLD_S,
    SoakHooks,
    SoakWriterConfig,
    SoakWriterError,
    aim_path_of,
)
from rulvar_conformance.soak.events import Event, EventSink, FileSink, monotonic_ns
from rulvar_store import (
    JournalOrderViolation,
    LeasableStore,
    Lease,
    LeaseHeldError,
    MetaLookupStore,
    StoreUnavailableError,
    TranscriptStore,
)
from rulvar_store.backend import set_failpoint_hook

__all__ = ["SoakHooks", "SoakWriterError", "main", "run_soak_writer"]

MAX_ROUNDS: Final = 500


class _Store(LeasableStore, MetaLookupStore, Protocol):
    """The soak needs both protocols from one journal handle."""


@dataclass
class Tenure:
    lease: Lease
    tail: float
    counter: int = 0
    ended: bool = False  # fenced out, deleted or errored: no release, sweep at once
    skip_sweep: bool = False  # outcome unknown: the lease may still be live


class SoakWriter:
    """One writer incarnation's protocol state."""

    def __init__(
        self,
        journal: Any,
        blobs: TranscriptStore,
        config: SoakWriterConfig,
        sink: EventSink,
        hooks: SoakHooks,
    ) -> None:
        self.journal = cast(_Store, journal)
        self.blobs = blobs
        self.config = config
        self.sink = sink
        self.hooks = hooks
        self.owner = config.owner
        self.rng = random.Random(
            config.seed * 1_000_003
            + config.writer * 7_919
            + config.incarnation * 104_729
        )
        self.calls = 0
        self.victims = 0
        self.dead: dict[str, list[Lease]] = {}

    # -- records and calls -------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        event: Event = {
            "t": kind,
            "w": self.config.writer,
            "inc": self.config.incarnation,
            "ns": monotonic_ns(),
        }
        event.update(fields)
        self.sink(event)

    def call(self, op: str, fn: Callable[[], object], **fields: Any) -> tuple[str, str]:
        """Log the invoke, run ``fn`` with S2's retries; return (id, outcome).

        Outcomes: ``ok``, ``lease`` (LeaseHeldError), ``order``
        (JournalOrderViolation), ``unknown`` (the connection dropped mid-call).
        """
        self.calls += 1
        op_id = f"w{self.config.writer}.{self.config.incarnation}-{self.calls}"
        self.emit("invoke", id=op_id, op=op, **fields)
        for _ in range(MAX_ROUNDS):
            try:
                fn()
            except LeaseHeldError:
                return op_id, "lease"
            except JournalOrderViolation:
                return op_id, "order"
            except StoreUnavailableError as exc:
                # Retrying could apply the call twice; the referee resolves it.
                self.emit("unknown", id=op_id, detail=str(exc)[:300])
                return op_id, "unknown"
            except Exception as exc:
                if not self.hooks.retryable(exc):
                    self.emit("error", id=op_id, detail=f"{op}: {exc!r}"[:500])
                    raise
                self.emit("busy", id=op_id)
                self.hooks.sleep_ms(self.rng.uniform(1, 3))
            else:
                return op_id, "ok"
        self.emit(
            "error", id=op_id, detail=f"{op}: still busy after {MAX_ROUNDS} rounds"
        )
        raise SoakWriterError(f"{op}: still busy after {MAX_ROUNDS} rounds")

    def nonce(self, tenure: Tenure) -> str:
        return f"w{self.config.writer}.{self.config.incarnation}-e{tenure.lease.epoch}-c{tenure.counter}"

    def accept(
        self, op_id: str, surface: str, tenure: Tenure, nonce: str, **more: Any
    ) -> None:
        lease = tenure.lease
        self.emit(
            "accept",
            id=op_id,
            surface=surface,
            run=lease.run_id,
            epoch=lease.epoch,
            counter=tenure.counter,
            nonce=nonce,
            **more,
        )
        tenure.counter += 1

    def kicked(self, op_id: str, outcome: str, surface: str, tenure: Tenure) -> None:
        """A live-tenure call did not succeed: record why and end the tenure."""
        lease = tenure.lease
        tenure.ended = True
        if outcome == "lease":
            self.emit(
                "fence-kick",
                id=op_id,
                surface=surface,
                run=lease.run_id,
                epoch=lease.epoch,
            )
        elif outcome == "order":
            # The holder tracks its own run's tail: an order refusal means another
            # writer's entry got in while this lease was current, so the fence was
            # not checked inside the write transaction. The seq guard only noticed.
            self.emit(
                "error",
                id=op_id,
                finding="FENCE BYPASSED",
                surface=surface,
                detail=f"its {surface} on {lease.run_id} with epoch {lease.epoch} was "
                "refused as out of order (JournalOrderViolation): another writer's entry "
                "was already in the run it held",
            )
        else:
            tenure.skip_sweep = True

    # -- reads -------------------------------------------------------------------

    def tail(self, run_id: str) -> float:
        entries = self.read(lambda: self.journal.load(run_id))
        seqs = [e["seq"] for e in entries if isinstance(e.get("seq"), (int, float))]
        return max(seqs, default=0)

    def read(self, fn: Callable[[], Any]) -> Any:
        rounds, down_since = 0, None
        while rounds < MAX_ROUNDS:
            try:
                return fn()
            except Exception as exc:
                unavailable = isinstance(exc, StoreUnavailableError)
                if not (self.hooks.retryable(exc) or unavailable):
                    raise
                if unavailable and self.config.outage_s > 0:
                    # A fault soak's outage: wait it out (bounded), not in 1 ms rounds.
                    now = time.monotonic()
                    down_since = now if down_since is None else down_since
                    if now - down_since > self.config.outage_s:
                        raise SoakWriterError(
                            f"store still unavailable after {self.config.outage_s:g} s: {exc}"
                        ) from exc
                    self.hooks.sleep_ms(self.rng.uniform(10, 30))
                    continue
                rounds += 1
                self.hooks.sleep_ms(self.rng.uniform(1, 3))
        raise SoakWriterError(f"read still busy after {MAX_ROUNDS} rounds")

    # -- the tenure (S3) ---------------------------------------------------------

    def acquire(self) -> Tenure | None:
        while not self.hooks.stop():
            run_id = self.rng.choice(self.config.runs)
            leases: list[Lease] = []

            def take(run_id: str = run_id, leases: list[Lease] = leases) -> None:
                leases.append(self.journal.acquire(run_id, self.owner))

            op_id, outcome = self.call("acquire", take, run=run_id)
            if outcome == "ok":
                lease = leases[-1]
                self.emit("grant", id=op_id, run=run_id, epoch=lease.epoch)
                return Tenure(lease, self.tail(run_id))
            if outcome != "unknown":  # an unknown acquire stays unresolved in the log
                self.emit("held", id=op_id, run=run_id)
            self.hooks.sleep_ms(self.rng.uniform(3, 14))
        return None

    def tenure(self) -> bool:
        tenure = self.acquire()
        if tenure is None:
            return False
        self.marker(tenure)
        steps = self.rng.randint(3, 8)
        while not tenure.ended and steps > 0 and not self.hooks.stop():
            steps -= 1
            self.operation(tenure)
        self.finish(tenure)
        return True

    def append(self, tenure: Tenure, surface: str) -> None:
        nonce = self.nonce(tenure)
        seq = tenure.tail + 1
        entry = {
            "seq": seq,
            "kind": "step",
            "status": "ok",
            "value": {"soak": {"nonce": nonce, "epoch": tenure.lease.epoch}},
        }
        lease = tenure.lease
        op_id, outcome = self.call(
            "append",
            lambda: self.journal.append(lease.run_id, entry, lease),
            run=lease.run_id,
            epoch=lease.epoch,
            nonce=nonce,
            seq=seq,
            counter=tenure.counter,
        )
        if outcome == "ok":
            tenure.tail = seq
            self.accept(op_id, surface, tenure, nonce, seq=seq)
        else:
            self.kicked(op_id, outcome, surface, tenure)

    def marker(self, tenure: Tenure) -> None:
        self.append(tenure, "marker")

    def operation(self, tenure: Tenure) -> None:
        dice = self.rng.random()
        if dice < 0.28:
            self.append(tenure, "append")
        elif dice < 0.46:
            probes.put_meta(self, tenure)
        elif dice < 0.60:
            probes.blob_put(self, tenure)
        elif dice < 0.69:
            probes.blob_delete(self, tenure)
        elif dice < 0.78:
            probes.victim_cycle(self, tenure)
        elif dice < 0.86:
            probes.renew(self, tenure)
        elif dice < 0.95:
            probes.cross_run(self, tenure)
        else:
            probes.holder_delete(self, tenure)

    def simple(
        self, tenure: Tenure, surface: str, fn: Callable[[], object], **more: Any
    ) -> None:
        """A fenced mutation whose only failure mode is the fence (meta, blobs, delete)."""
        nonce = self.nonce(tenure)
        lease = tenure.lease
        op_id, outcome = self.call(
            surface,
            fn,
            run=lease.run_id,
            epoch=lease.epoch,
            nonce=nonce,
            counter=tenure.counter,
            **more,
        )
        if outcome == "ok":
            self.accept(op_id, surface, tenure, nonce, **more)
        else:
            self.kicked(op_id, outcome, surface, tenure)

    def finish(self, tenure: Tenure) -> None:
        lease = tenure.lease
        if tenure.skip_sweep:
            self.read(lambda: _quiet(lambda: self.journal.release(lease)))
            return
        if not tenure.ended:
            if self.rng.random() < 0.5:
                stall_ms = math.ceil(1.4 * self.config.ttl_ms)
                self.emit("stall", run=lease.run_id, epoch=lease.epoch, ms=stall_ms)
                self.hooks.sleep_ms(stall_ms)
            else:
                op_id, outcome = self.call(
                    "release",
                    lambda: self.journal.release(lease),
                    run=lease.run_id,
                    epoch=lease.epoch,
                )
                if outcome == "ok":
                    self.emit("released", id=op_id, run=lease.run_id, epoch=lease.epoch)
                elif outcome == "unknown":
                    return
                else:
                    self.kicked(op_id, outcome, "release", tenure)
        probes.sweep(self, lease)

    def run(self) -> None:
        self.emit("start", owner=self.owner, pid=os.getpid())
        while not self.hooks.stop():
            if not self.tenure():
                break
        self.emit("done", stats=store_figures(self.journal, self.blobs))


def store_figures(journal: object, blobs: object) -> dict[str, Any] | None:
    """The stores' own counters (``stats()``), the blob store's added when it is not
    the journal's twin (a twin's are in the journal's); ``None`` without them."""
    parts = [journal] if getattr(journal, "_twin", None) is blobs else [journal, blobs]
    found: dict[str, Any] = {}
    for part in parts:
        stats = getattr(part, "stats", None)
        if not callable(stats):
            return None
        for name, value in stats().items():
            if isinstance(value, int) and not isinstance(value, bool):
                found[name] = found.get(name, 0) + value
    return found


def _quiet(fn: Callable[[], object]) -> None:
    with suppress(LeaseHeldError):
        fn()


def run_soak_writer(
    journal: Any,
    blobs: TranscriptStore,
    config: SoakWriterConfig,
    sink: EventSink,
    hooks: SoakHooks,
) -> None:
    """Loop tenures until ``hooks.stop()`` (S6); an escaping exception logs ``fatal``."""
    writer = SoakWriter(journal, blobs, config, sink, hooks)
    try:
        writer.run()
    except BaseException as exc:
        writer.emit("fatal", detail=repr(exc)[:1000])
        raise


def _transaction_marker(
    sink: EventSink, config: SoakWriterConfig
) -> Callable[[str, str], None]:
    aim_path = aim_path_of(config)

    def mark(operation: str, point: str) -> None:
        if point == "after-fence-check" and os.path.exists(aim_path):
            sink(
                {
                    "t": "txn",
                    "w": config.writer,
                    "inc": config.incarnation,
                    "ns": monotonic_ns(),
                    "op": operation,
                }
            )
            # Hold the transaction open briefly: the runner's SIGSTOP lands here.
            time.sleep(AIM_HOLD_S)

    return mark


def main() -> int:
    """Entry point of one writer process: config from the environment, location by dill."""
    config = SoakWriterConfig.from_env()
    location = load_location(config.location_path, config.sys_path)
    sink = FileSink(config.report_path)
    stop_path = config.stop_path
    hooks = SoakHooks(stop=lambda: os.path.exists(stop_path))
    if config.writer % 2 == 0:
        # Even writers can be asked (an aim file) to announce their next write
        # transaction and hold it open briefly, so the runner's SIGSTOP lands inside
        # it. (A PostgreSQL store with a failpoint hook runs its explicit-transaction
        # path; odd writers keep the one-statement path.)
        set_failpoint_hook(_transaction_marker(sink, config))
    try:
        opened = location.open(config.ttl_ms)  # bare: concurrent boot is under test
    except BaseException as exc:
        sink(
            {
                "t": "fatal",
                "w": config.writer,
                "inc": config.incarnation,
                "ns": monotonic_ns(),
                "detail": f"open: {exc!r}"[:1000],
            }
        )
        raise
    company = start_companions(opened.journal, config)
    try:
        run_soak_writer(opened.journal, opened.transcripts, config, sink, hooks)
    finally:
        stop_companions(*company)
        opened.close()
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
