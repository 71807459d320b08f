"""What copies share: their records, the mover's leases, the destination's epoch.

``CopyOutcome`` is what one run's copy did; the mover takes its own brief lease
(owner ``rulvar-move:<host>:<pid>``, ttl ``MOVER_TTL_MS``) where a store needs
one, renews it while it works (``_Keeper``), always waits out a lease an earlier
mover left behind, and raises a destination's epoch counter through the SPI
where the store cannot set it (``_raise_epoch_by_leases``).
"""

from __future__ import annotations

import os
import socket
import time
from contextlib import suppress
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, Protocol

from rulvar_store._move_rows import has_run_rows, has_run_rows_writer
from rulvar_store._moved import MOVED_OWNER_PREFIX, moved_destination
from rulvar_store._observe import has_lease_peek
from rulvar_store._protocols import JournalStore, TranscriptStore
from rulvar_store._records import Lease
from rulvar_store._retention import is_leasable
from rulvar_store.errors import LeaseHeldError, RulvarError, RunMovedError

__all__ = [
    "BATCH_BYTES",
    "BATCH_ENTRIES",
    "MOVER_OWNER_PREFIX",
    "MOVER_TTL_MS",
    "CopyOutcome",
    "StorePair",
    "flush_destination",
    "mover_owner",
]


MOVER_OWNER_PREFIX: Final = "rulvar-move:"


# The lease ttl the CLI opens both stores with: a killed mover frees its runs
# within it, and the re-run waits that long at most.
MOVER_TTL_MS: Final = 15_000


# One write batch: this many entries or bytes, whichever comes first (at least
# one record, so memory is bounded by the largest single record).
BATCH_ENTRIES: Final = 2_000


BATCH_BYTES: Final = 4 * 1024 * 1024


_PAGE: Final = 2_000


_POLL_S: Final = 0.25


Action = Literal["copied", "moved", "already-moved", "skipped", "failed", "dry-run"]


class StorePair(Protocol):
    """A journal store and its blob store: what ``open_store`` returns."""

    @property
    def journal(self) -> JournalStore: ...

    @property
    def transcripts(self) -> TranscriptStore: ...


@dataclass(frozen=True, slots=True)
class CopyOutcome:
    """What one run's copy did; ``remains`` when the run still needs attention."""

    run_id: str
    action: Action
    entries: int = 0
    blobs: int = 0
    bytes: int = 0
    epoch: int | None = None
    detail: str = ""

    @property
    def remains(self) -> bool:
        return self.action in ("skipped", "failed")

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["runId"] = row.pop("run_id")
        row["remains"] = self.remains
        return row


def mover_owner() -> str:
    """The lease owner of copies in this process: ``rulvar-move:<host>:<pid>``."""
    return f"{MOVER_OWNER_PREFIX}{socket.gethostname()[:64]}:{os.getpid()}"


class _Keeper:
    """Renews the mover's leases every third of their ttl while a copy runs (L8)."""

    def __init__(self) -> None:
        self._held: list[tuple[Any, Lease, float, float]] = []

    def hold(self, journal: Any, lease: Lease) -> None:
        period = max(0.05, getattr(journal, "lease_ttl_ms", 60_000) / 3000)
        self._held.append((journal, lease, period, time.monotonic()))

    def drop(self, lease: Lease) -> None:
        self._held = [held for held in self._held if held[1] is not lease]

    def tick(self) -> None:
        now = time.monotonic()
        for index, (journal, lease, period, last) in enumerate(self._held):
            if now - last >= period:
                journal.renew(lease)
                self._held[index] = (journal, lease, period, now)


def _holder(journal: Any, run_id: str, exc: LeaseHeldError) -> tuple[str | None, float]:
    """The live holder's owner and the seconds left of its lease (peeked if possible)."""
    if has_lease_peek(journal):
        state = journal.peek_lease(run_id)
        if state is not None and state.live:
            return state.owner, (state.expires_at - state.now) / 1000
    return exc.owner, 0.0


def _acquire(
    journal: Any, run_id: str, owner: str, wait_s: float
) -> Lease | LeaseHeldError:
    """Acquire, waiting up to ``wait_s`` (and always out an earlier mover's lease)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            lease: Lease = journal.acquire(run_id, owner)
            return lease
        except RunMovedError as exc:
            return exc
        except LeaseHeldError as exc:
            holder, left_s = _holder(journal, run_id, exc)
            limit = deadline
            if holder is not None and holder.startswith(MOVER_OWNER_PREFIX):
                limit = max(
                    limit, time.monotonic() + min(left_s, MOVER_TTL_MS / 1000) + 1
                )
            if time.monotonic() >= limit:
                if exc.owner is None and holder is not None:
                    return LeaseHeldError(str(exc), run_id, holder, exc.epoch)
                return exc
            time.sleep(_POLL_S)


def _release_quietly(journal: Any, lease: Lease | None) -> None:
    if lease is None:
        return
    # Expired or taken over meanwhile: nothing of ours to give back.
    with suppress(RulvarError):
        journal.release(lease)


def _refusal(where: str, exc: LeaseHeldError) -> str:
    if isinstance(exc, RunMovedError):
        return f"{where} run was moved to {exc.destination}"
    holder = f" by {exc.owner!r}" if exc.owner else ""
    return f"{where} run is leased{holder} (epoch {exc.epoch}); --wait to wait for it"


def _writes_rows(journal: Any) -> bool:
    """A store that takes a copy's batches in fenced transactions of its own."""
    return has_run_rows_writer(journal) and has_run_rows(journal)


def _destination_ready(
    journal: Any, run_id: str, owner: str, wait_s: float, keeper: _Keeper
) -> Lease | LeaseHeldError | None:
    """The destination's mover lease, or None where ``write_rows`` needs none.

    A store with the row abilities takes each batch in one transaction that
    refuses a live owner, so no lease is held there: the wait below only
    reports a live holder (or waits one out) before the first write.
    """
    if not is_leasable(journal):
        return None
    if not (has_run_rows_writer(journal) and has_run_rows(journal)):
        got = _acquire(journal, run_id, owner, wait_s)
        if isinstance(got, Lease):
            keeper.hold(journal, got)
        return got
    if not has_lease_peek(journal):
        return None
    deadline = time.monotonic() + wait_s
    while True:
        state = journal.peek_lease(run_id)
        if state is None or not state.live:
            return None
        limit = deadline
        if state.owner.startswith(MOVER_OWNER_PREFIX):
            left_s = (state.expires_at - state.now) / 1000
            limit = max(limit, time.monotonic() + min(left_s, MOVER_TTL_MS / 1000) + 1)
        if time.monotonic() >= limit:
            refusal = LeaseHeldError(
                f"run {run_id!r} is leased by {state.owner!r}",
                run_id,
                state.owner,
                state.epoch,
            )
            if state.owner.startswith(MOVED_OWNER_PREFIX):
                return RunMovedError(
                    str(refusal),
                    run_id,
                    state.owner,
                    state.epoch,
                    moved_destination(state.owner),
                )
            return refusal
        time.sleep(_POLL_S)


def flush_destination(destination: StorePair) -> None:
    """Make every write acknowledged so far durable (``flush_writes`` where offered)."""
    flush = getattr(destination.journal, "flush_writes", None)
    if callable(flush):
        flush()


def _raise_epoch_by_leases(journal: Any, run_id: str, epoch: int, owner: str) -> int:
    """The SPI's only way up: acquire and release until the counter reaches ``epoch``.

    One round per epoch the destination lacks; a store with ``write_rows`` sets
    the counter in one statement instead.
    """
    while True:
        lease = journal.acquire(run_id, owner)
        journal.release(lease)
        if lease.epoch >= epoch:
            return int(lease.epoch)
