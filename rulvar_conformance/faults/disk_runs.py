"""Full disks and I/O errors under a fenced writer (CONTRACT E1).

``run_disk_faults`` writes a leased run, then, for each fault case, makes the
fault layer fail the chosen operations and checks what the writer sees: every
append, meta write and blob write fails with the retryable
``StoreUnavailableError`` (never a raw OS or driver error, never a hang);
once the layer heals, the SAME handle reads every acknowledged write back,
resolves the failed write's unknown outcome from what it reads, and writes on
under the same lease. A fresh handle then finds exactly what was acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rulvar_store import LeasableStore, Lease, OpenedStore
from rulvar_store.errors import StoreUnavailableError

__all__ = ["DiskFault", "DiskReport", "FaultCase", "FaultLayer", "run_disk_faults"]

RUN_ID = "disk-faults"

DiskFault = Literal["ENOSPC", "EIO"]
"""A full disk, or one that fails its reads and writes."""


class FaultLayer(Protocol):
    """Fails chosen operations of the store's files until healed."""

    def fail(self, kind: DiskFault, ops: frozenset[str]) -> None: ...

    def heal(self) -> None: ...


@dataclass(frozen=True)
class FaultCase:
    kind: DiskFault
    ops: frozenset[str]

    def __str__(self) -> str:
        return f"{self.kind} on {'+'.join(sorted(self.ops))}"


@dataclass
class DiskReport:
    cases: int = 0
    typed_errors: int = 0
    landed_anyway: int = 0
    acknowledged: int = 0
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.cases} disk faults injected, {self.typed_errors} writes failed "
            f"with the retryable StoreUnavailableError, {self.landed_anyway} failed "
            f"writes found landed after the heal (unknown outcome resolved), "
            f"{self.acknowledged} acknowledged writes all kept"
        )


class _Writer:
    def __init__(self, opened: OpenedStore, report: DiskReport) -> None:
        self.opened = opened
        self.report = report
        self.store = opened.journal
        # A store without leases (the file store) writes unfenced.
        self.lease: Lease | None = (
            self.store.acquire(RUN_ID, "disk")
            if isinstance(self.store, LeasableStore)
            else None
        )
        self.acked: list[int] = []

    def append(self) -> None:
        seq = len(self.acked)
        self.store.append(RUN_ID, {"seq": seq, "kind": "step"}, self.lease)
        self.acked.append(seq)
        self.report.acknowledged += 1

    def refused(self, case: FaultCase) -> None:
        """Every write surface fails typed while the fault lasts."""
        seq = len(self.acked)
        calls: Sequence[tuple[str, Callable[[], None]]] = (
            ("append", lambda: self.store.append(RUN_ID, {"seq": seq}, self.lease)),
            (
                "put_meta",
                lambda: self.store.put_meta(
                    {"runId": RUN_ID, "status": "running", "note": str(case)},
                    self.lease,
                ),
            ),
            (
                "blob put",
                lambda: self.opened.transcripts.put(
                    f"{RUN_ID}/blob", b"x" * 70_000, self.lease
                ),
            ),
        )
        for name, call in calls:
            try:
                call()
            except StoreUnavailableError as exc:
                self.report.typed_errors += 1
                if not exc.retryable:
                    self._violate(f"{case}: {name} raised a non-retryable {exc!r}")
            except Exception as exc:
                self._violate(f"{case}: {name} raised {type(exc).__name__}: {exc}")
            else:
                self._violate(f"{case}: {name} succeeded while the disk failed")

    def recovered(self, case: FaultCase) -> None:
        """The same handle reads back, resolves the unknown outcome, writes on."""
        seqs = [entry.get("seq") for entry in self.store.load(RUN_ID)]
        acked: list[object] = list(self.acked)
        if seqs == [*acked, len(self.acked)]:
            self.report.landed_anyway += 1  # the failed append had landed
            self.acked.append(len(self.acked))
        elif seqs != acked:
            self._violate(f"{case}: after the heal the journal is {seqs}, told {acked}")
            return
        if self.lease is not None and isinstance(self.store, LeasableStore):
            self.store.renew(self.lease)
        self.append()

    def _violate(self, detail: str) -> None:
        self.report.violations.append(detail)


def run_disk_faults(
    open_handle: Callable[[], OpenedStore],
    layer: FaultLayer,
    cases: Sequence[FaultCase],
) -> DiskReport:
    """Inject each case into one long-lived handle, then reopen and compare."""
    report = DiskReport()
    with open_handle() as opened:
        writer = _Writer(opened, report)
        for _ in range(3):
            writer.append()
        for case in cases:
            report.cases += 1
            layer.fail(case.kind, case.ops)
            try:
                writer.refused(case)
            finally:
                layer.heal()
            writer.recovered(case)
        acked = list(writer.acked)
    with open_handle() as fresh:
        found = [entry.get("seq") for entry in fresh.journal.load(RUN_ID)]
        if found != acked:
            report.violations.append(f"a fresh handle reads {found}, told {acked}")
    return report
