"""Copy and move runs between stores, epochs carried and the source fenced (V1-V8).

One run at a time, under a mover's lease at both ends (owner ``rulvar-move:...``):

1. The source lease freezes the run: no owner can write while it is read, and
   its epoch is the source's counter (L3). A run under another live lease is
   skipped (or waited for); a lease of an earlier mover (killed part way) is
   always waited out: its ttl is short.
2. The destination lease excludes its writers; what the destination already
   holds must be a prefix of the source (a copy killed part way): only the
   rest is written, so a re-run never duplicates nor loses an entry.
3. Journal, meta and blobs are copied record by record (raw stored text where
   both stores offer ``_move_rows``), one bounded batch in memory at a time.
4. The destination's epoch counter is raised above the source's: one past it
   for a copy, two past it for a move (one past the tombstone's).
5. ``move`` verifies the destination against the source, then turns its source
   lease into the tombstone (``_moved``): no source owner can write again, and
   a new acquire there raises ``RunMovedError`` naming the destination.

A store without leases (the file store) is read or written without them and
has no epoch to carry; a move needs a source that writes tombstones.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from itertools import chain
from typing import Any, Final, Literal, Protocol, cast

from rulvar_store._batch import BatchTranscriptStore
from rulvar_store._capabilities import has_batch_put
from rulvar_store._json import dump_record, load_record
from rulvar_store._move_rows import has_run_batches, has_run_rows, has_run_rows_writer
from rulvar_store._moved import MOVED_OWNER_PREFIX, moved_destination, moved_owner
from rulvar_store._observe import has_lease_peek
from rulvar_store._protocols import JournalStore, TranscriptStore
from rulvar_store._records import Lease
from rulvar_store._retention import is_leasable
from rulvar_store.errors import (
    ConfigError,
    CopyConflictError,
    LeaseHeldError,
    RulvarError,
    RunMovedError,
    StoreBusyError,
)

__all__ = [
    "MOVER_OWNER_PREFIX",
    "MOVER_TTL_MS",
    "CopyOutcome",
    "RunReader",
    "RunWriter",
    "StorePair",
    "check_movable",
    "copy_run",
    "copy_runs",
    "flush_destination",
    "mover_owner",
    "run_digest",
    "verify_run",
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


def check_movable(source: StorePair) -> None:
    """Raise ``ConfigError`` unless ``source`` can be fenced by a tombstone (V4).

    Raises:
        ConfigError: the source takes no leases (the file store) or cannot
            write the tombstone (a store without ``fence_moved``): copy instead.
    """
    journal = source.journal
    if not is_leasable(journal) or not has_run_rows_writer(journal):
        raise ConfigError(
            f"{type(journal).__name__} cannot fence a moved run (it has no leases or "
            "no fence_moved): use 'runs copy', then retire the source yourself"
        )


# -- leases ----------------------------------------------------------------------


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


# -- reading a run ---------------------------------------------------------------


class RunReader:
    """One run of a store as stored texts and blobs, one page at a time."""

    def __init__(self, store: StorePair, run_id: str) -> None:
        self.journal = store.journal
        self.transcripts = store.transcripts
        self.run_id = run_id
        self.raw = has_run_rows(self.journal)

    def entry_texts(self) -> Iterator[str]:
        journal = self.journal
        if has_run_rows(journal):
            after = 0
            while True:
                page = journal.entry_rows(self.run_id, after, _PAGE)
                for _, text in page:
                    yield text
                if len(page) < _PAGE:
                    return
                after = page[-1][0]
        else:
            for entry in journal.load(self.run_id):
                yield dump_record(entry)

    def entry_count(self) -> int:
        if has_run_rows(self.journal):
            return self.journal.entry_count(self.run_id)
        return len(self.journal.load(self.run_id))

    def meta_text(self) -> str | None:
        journal = self.journal
        if has_run_rows(journal):
            return journal.meta_row(self.run_id)
        meta = getattr(journal, "get_meta", None)
        if callable(meta):
            value = meta(self.run_id)
        else:
            found = [m for m in journal.list_runs() if m.get("runId") == self.run_id]
            value = found[0] if found else None
        return None if value is None else dump_record(value)

    def refs(self) -> list[str]:
        """Every blob ref of the run, the slashless ``<runId>`` first if stored (D11)."""
        refs = list(self.transcripts.list_refs(self.run_id))
        if self.transcripts.get(self.run_id) is not None:
            refs.insert(0, self.run_id)
        return refs

    def blobs(self) -> Iterator[tuple[str, bytes]]:
        for ref in self.refs():
            data = self.transcripts.get(ref)
            if data is not None:  # deleted since the listing
                yield ref, data

    def epoch(self) -> int:
        journal = self.journal
        return journal.epoch_counter(self.run_id) if has_run_rows(journal) else 0


def _same_record(a: str, b: str) -> bool:
    return a == b or load_record(a) == load_record(b)


# -- writing a run ---------------------------------------------------------------


class _NotFresh(Exception):
    """The destination already holds entries; what the first write had taken."""

    def __init__(self, entries: list[str], blobs: list[tuple[str, bytes]]) -> None:
        super().__init__(entries, blobs)
        self.entries = entries
        self.blobs = blobs


def _take_texts(source: Iterator[str]) -> tuple[list[str], int]:
    """The next batch of entry texts: up to ``BATCH_ENTRIES`` or ``BATCH_BYTES``."""
    batch: list[str] = []
    size = 0
    for text in source:
        batch.append(text)
        size += len(text)
        if len(batch) >= BATCH_ENTRIES or size >= BATCH_BYTES:
            break
    return batch, size


def _take_blobs(
    blobs: Iterator[tuple[str, bytes]], budget: int
) -> list[tuple[str, bytes]]:
    """Blobs up to ``budget`` bytes (at least one, if any is left)."""
    taken: list[tuple[str, bytes]] = []
    size = 0
    for pair in blobs:
        taken.append(pair)
        size += len(pair[1])
        if size >= budget or len(taken) >= BATCH_ENTRIES:
            break
    return taken


class RunWriter:
    """One run of the destination, written under ``lease`` (or single-writer)."""

    def __init__(
        self, store: StorePair, run_id: str, lease: Lease | None, keeper: _Keeper
    ) -> None:
        self.reader = RunReader(store, run_id)
        self.journal = store.journal
        self.transcripts = store.transcripts
        self.run_id = run_id
        self.lease = lease
        self.keeper = keeper
        self.rows = has_run_rows_writer(self.journal) and has_run_rows(self.journal)
        self.written_bytes = 0
        # False: commits may precede their durability; the caller flushes.
        self.durable = True

    def journal_and_meta(
        self,
        meta: str | None,
        texts: Iterable[str],
        epoch: int,
        blobs: Iterable[tuple[str, bytes]] = (),
    ) -> tuple[int, bool, int]:
        """Write what the destination lacks: entries, the meta, blobs, the epoch floor.

        Returns (entries written, whether the meta was written, blobs written).
        Over the row abilities the meta, the epoch and the first blobs ride on
        the last entry batch's transaction, so a short run costs one write;
        through the SPI the epoch is left to ``_raise_epoch_by_leases``.

        Raises:
            CopyConflictError: the destination's journal is not a prefix of ``texts``.
        """
        source = iter(texts)
        blob_pairs: Iterator[tuple[str, bytes]] = iter(blobs)
        if self.rows:
            try:
                return self._fresh(meta, source, epoch, blob_pairs)
            except _NotFresh as seen:  # the destination holds some: compare first
                source = chain(seen.entries, source)
                blob_pairs = chain(seen.blobs, blob_pairs)
        held = self.reader.entry_count() if self.rows else -1
        if held != 0:
            held = self._prefix(source)
        stored = self.reader.meta_text()
        meta_out = (
            meta
            if meta is not None and (stored is None or not _same_record(meta, stored))
            else None
        )
        written = 0
        batch: list[str] = []
        size = 0
        for text in source:
            batch.append(text)
            size += len(text)
            if len(batch) >= BATCH_ENTRIES or size >= BATCH_BYTES:
                self._append(batch, held + written, None, 0)
                written += len(batch)
                batch, size = [], 0
        if not self.rows:
            self._append(batch, held + written, None, 0)
            if meta_out is not None:
                self.keeper.tick()
                self.journal.put_meta(load_record(meta_out), self.lease)
            return written + len(batch), meta_out is not None, self.blobs(blob_pairs)
        present = set(self.reader.refs())
        missing = self._missing(blob_pairs, present)
        folded, blob_size = [], size
        for pair in missing:
            folded.append(pair)
            blob_size += len(pair[1])
            if blob_size >= BATCH_BYTES or len(folded) >= BATCH_ENTRIES:
                break
        if batch or meta_out is not None or epoch > 0 or folded:
            self._append(batch, held + written, meta_out, epoch, folded)
        written += len(batch)
        blob_count = len(folded)
        rest: list[tuple[str, bytes]] = []
        blob_size = 0
        for pair in missing:
            rest.append(pair)
            blob_size += len(pair[1])
            if blob_size >= BATCH_BYTES or len(rest) >= BATCH_ENTRIES:
                self._append([], held + written, None, 0, rest)
                blob_count += len(rest)
                rest, blob_size = [], 0
        if rest:
            self._append([], held + written, None, 0, rest)
            blob_count += len(rest)
        for ref in sorted(present - self._seen):
            self.keeper.tick()
            self.transcripts.delete(ref, self.lease)
        return written, meta_out is not None, blob_count

    def _fresh(
        self,
        meta: str | None,
        source: Iterator[str],
        epoch: int,
        blobs: Iterator[tuple[str, bytes]],
    ) -> tuple[int, bool, int]:
        """The common case in one write per batch: a destination without this run.

        Nothing is read first: the first write expects an empty journal and the
        store checks that in its transaction. A run that fits one batch goes in
        one transaction, meta, epoch floor and blobs included.

        Raises:
            _NotFresh: the destination already holds entries (nothing written);
                it carries what was taken from the iterators.
        """
        written = 0
        first = True
        while True:
            batch, size = _take_texts(source)
            done = len(batch) < BATCH_ENTRIES and size < BATCH_BYTES
            folded = _take_blobs(blobs, BATCH_BYTES - size) if done else []
            try:
                self._append(
                    batch, written, meta if done else None, epoch if done else 0, folded
                )
            except CopyConflictError:
                if first:
                    raise _NotFresh(batch, folded) from None
                raise
            first = False
            written += len(batch)
            if done:
                break
        count = len(folded)
        while True:
            rest = _take_blobs(blobs, BATCH_BYTES)
            if not rest:
                return written, meta is not None, count
            self._append([], written, None, 0, rest)
            count += len(rest)

    def _missing(
        self, pairs: Iterable[tuple[str, bytes]], present: set[str]
    ) -> Iterator[tuple[str, bytes]]:
        """The pairs the destination lacks or holds otherwise; notes every ref seen."""
        self._seen: set[str] = set()
        for ref, data in pairs:
            self._seen.add(ref)
            if ref in present and self.transcripts.get(ref) == data:
                continue
            yield ref, data

    def _prefix(self, source: Iterator[str]) -> int:
        """Consume from ``source`` what the destination already holds; return its count."""
        held = 0
        for stored in self.reader.entry_texts():
            incoming = next(source, None)
            if incoming is None or not _same_record(incoming, stored):
                raise CopyConflictError(
                    f"run {self.run_id!r} at the destination differs from the source at "
                    f"entry {held + 1}: another run under the same id? (nothing written)",
                    self.run_id,
                )
            held += 1
        return held

    def _append(
        self,
        texts: list[str],
        held: int,
        meta: str | None,
        epoch: int,
        blobs: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        self.keeper.tick()
        self.written_bytes += sum(len(text) for text in texts)
        self.written_bytes += sum(len(data) for _, data in blobs)
        if self.rows:
            self.journal.write_rows(  # type: ignore[attr-defined]  # has_run_rows_writer
                self.run_id,
                self.lease,
                expected_entries=held,
                entries=texts,
                meta=meta,
                epoch=epoch,
                blobs=blobs,
                durable=self.durable,
            )
            return
        for text in texts:
            self.journal.append(self.run_id, load_record(text), self.lease)

    def blobs(self, pairs: Iterable[tuple[str, bytes]]) -> int:
        """Make the run's blobs those of ``pairs``; return how many were written."""
        present = set(self.reader.refs())
        seen: set[str] = set()
        written = 0
        batch: list[tuple[str, bytes]] = []
        size = 0
        for ref, data in pairs:
            seen.add(ref)
            if ref in present and self.transcripts.get(ref) == data:
                continue
            batch.append((ref, data))
            size += len(data)
            if len(batch) >= BATCH_ENTRIES or size >= BATCH_BYTES:
                written += self._put(batch)
                batch, size = [], 0
        if batch:
            written += self._put(batch)
        for ref in sorted(present - seen):
            self.keeper.tick()
            self.transcripts.delete(ref, self.lease)
        return written

    def _put(self, batch: list[tuple[str, bytes]]) -> int:
        self.keeper.tick()
        self.written_bytes += sum(len(data) for _, data in batch)
        slashless = [pair for pair in batch if pair[0] == self.run_id]
        grouped = [pair for pair in batch if pair[0] != self.run_id]
        if has_batch_put(self.transcripts) and grouped:
            batched = cast(BatchTranscriptStore, self.transcripts)  # has_batch_put
            batched.put_many(grouped, self.lease)
        else:
            slashless = batch
        for ref, data in slashless:
            self.transcripts.put(ref, data, self.lease)
        return len(batch)


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


@dataclass(slots=True)
class _Staged:
    """A small run read whole under its source lease, waiting for its group's write."""

    run_id: str
    lease: Lease | None
    meta: str | None
    entries: list[str]
    blobs: list[tuple[str, bytes]]
    target: int
    size: int


_GROUP_RUNS: Final = 200


_NO_SUCH_RUN: Final = "no such run at the source (no meta, entries or blobs)"


def _absent(reader: RunReader) -> bool:
    """Whether the source holds nothing of the run (a mistyped --run, say)."""
    return (
        reader.meta_text() is None and reader.entry_count() == 0 and not reader.refs()
    )


def _stage(
    source: StorePair, run_id: str, owner: str, wait_s: float
) -> _Staged | CopyOutcome | None:
    """Read ``run_id`` whole if it is small (a quarter batch); None if it is not."""
    journal: Any = source.journal
    lease: Lease | None = None
    if is_leasable(journal):
        got = _acquire(journal, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            return CopyOutcome(run_id, "skipped", detail=_refusal("source", got))
        lease = got
    reader = RunReader(source, run_id)
    budget = BATCH_BYTES // 4
    meta = reader.meta_text()
    size = len(meta or "")
    entries: list[str] = []
    blobs: list[tuple[str, bytes]] = []
    for text in reader.entry_texts():
        entries.append(text)
        size += len(text)
        if size > budget or len(entries) >= BATCH_ENTRIES:
            _release_quietly(journal, lease)
            return None
    for ref, data in reader.blobs():
        blobs.append((ref, data))
        size += len(data)
        if size > budget or len(blobs) >= BATCH_ENTRIES:
            _release_quietly(journal, lease)
            return None
    if meta is None and not entries and not blobs:
        _release_quietly(journal, lease)
        return CopyOutcome(run_id, "skipped", detail=_NO_SUCH_RUN)
    epoch = max(lease.epoch if lease is not None else 0, reader.epoch())
    return _Staged(run_id, lease, meta, entries, blobs, epoch + 1 if epoch else 0, size)


def _write_group(
    source: StorePair,
    destination: StorePair,
    group: list[_Staged],
    owner: str,
    wait_s: float,
) -> list[CopyOutcome]:
    """One transaction for the group's runs; run by run if any is not new there."""
    journal: Any = destination.journal
    try:
        journal.write_runs(
            [(s.run_id, s.entries, s.meta, s.target, s.blobs) for s in group],
            durable=False,
        )
    except (CopyConflictError, LeaseHeldError, StoreBusyError):
        for staged in group:
            _release_quietly(source.journal, staged.lease)
        return [
            copy_run(
                source, destination, s.run_id, wait_s=wait_s, owner=owner, durable=False
            )
            for s in group
        ]
    for staged in group:
        _release_quietly(source.journal, staged.lease)
    return [
        CopyOutcome(
            s.run_id,
            "copied",
            len(s.entries),
            len(s.blobs),
            s.size,
            s.target or None,
            f"{len(s.entries)} entries, {len(s.blobs)} blobs"
            + (", meta" if s.meta is not None else ""),
        )
        for s in group
    ]


def copy_runs(
    source: StorePair,
    destination: StorePair,
    run_ids: Iterable[str],
    *,
    move: bool = False,
    destination_name: str = "",
    wait_s: float = 0.0,
    verify: bool = False,
    flush_every: int = 256,
) -> Iterator[CopyOutcome]:
    """``copy_run`` over many runs, the destination's durability paid per group.

    Each run's writes commit without waiting for their flush; every
    ``flush_every`` runs (and at the end) one barrier makes them durable, and
    only then are their outcomes yielded. A crash before a barrier loses only
    runs not yet reported, which the same call copies again. (A move flushes
    before each tombstone as well.)

    A copy (not a move, not verified) into a store offering ``write_runs``
    (PostgreSQL) writes small runs, each read whole under its own source lease,
    many to a transaction: new at the destination, each checked there as
    ``write_rows`` checks one; a group with any run not new is written run by
    run instead.
    """
    owner = mover_owner()
    batches = has_run_batches(destination.journal) and not move and not verify
    pending: list[CopyOutcome] = []
    group: list[_Staged] = []
    group_size = 0
    for run_id in run_ids:
        staged = _stage(source, run_id, owner, wait_s) if batches else None
        if isinstance(staged, CopyOutcome):
            pending.append(staged)
            continue
        if isinstance(staged, _Staged):
            group.append(staged)
            group_size += staged.size
            if group_size >= BATCH_BYTES or len(group) >= _GROUP_RUNS:
                pending.extend(_write_group(source, destination, group, owner, wait_s))
                group, group_size = [], 0
        else:
            pending.append(
                copy_run(
                    source,
                    destination,
                    run_id,
                    move=move,
                    destination_name=destination_name,
                    wait_s=wait_s,
                    verify=verify,
                    owner=owner,
                    durable=False,
                )
            )
        if len(pending) >= flush_every:
            flush_destination(destination)
            yield from pending
            pending = []
    if group:
        pending.extend(_write_group(source, destination, group, owner, wait_s))
    flush_destination(destination)
    yield from pending


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


# -- verifying -------------------------------------------------------------------


def run_digest(reader: RunReader) -> tuple[str, int, int]:
    """SHA-256 over a run's records as parsed values: (hex digest, entries, blobs).

    Parsed, then dumped canonically, so two stores holding the same records in
    different textual forms (a TypeScript writer's spacing) agree.
    """
    digest = hashlib.sha256()
    entries = blobs = 0
    for text in reader.entry_texts():
        digest.update(b"E" + dump_record(load_record(text)).encode() + b"\n")
        entries += 1
    meta = reader.meta_text()
    digest.update(
        b"M"
        + (b"-" if meta is None else dump_record(load_record(meta)).encode())
        + b"\n"
    )
    for ref, data in reader.blobs():
        digest.update(
            b"B" + ref.encode() + b"\x00" + hashlib.sha256(data).digest() + b"\n"
        )
        blobs += 1
    return digest.hexdigest(), entries, blobs


def verify_run(
    source: StorePair, destination: StorePair, run_id: str, *, epoch_at_least: int = 0
) -> list[str]:
    """Return how the destination's copy of ``run_id`` differs from the source ([] if not)."""
    problems: list[str] = []
    src_digest, src_entries, src_blobs = run_digest(RunReader(source, run_id))
    dst_reader = RunReader(destination, run_id)
    dst_digest, dst_entries, dst_blobs = run_digest(dst_reader)
    if (src_entries, src_blobs) != (dst_entries, dst_blobs):
        problems.append(
            f"{dst_entries} entries and {dst_blobs} blobs at the destination, "
            f"{src_entries} and {src_blobs} at the source"
        )
    elif src_digest != dst_digest:
        problems.append("records differ between source and destination")
    if epoch_at_least and dst_reader.raw and dst_reader.epoch() < epoch_at_least:
        problems.append(
            f"destination epoch counter {dst_reader.epoch()} is below {epoch_at_least}"
        )
    return problems


# -- one run ---------------------------------------------------------------------


def _refusal(where: str, exc: LeaseHeldError) -> str:
    if isinstance(exc, RunMovedError):
        return f"{where} run was moved to {exc.destination}"
    holder = f" by {exc.owner!r}" if exc.owner else ""
    return f"{where} run is leased{holder} (epoch {exc.epoch}); --wait to wait for it"


def copy_run(
    source: StorePair,
    destination: StorePair,
    run_id: str,
    *,
    move: bool = False,
    destination_name: str = "",
    wait_s: float = 0.0,
    verify: bool = False,
    owner: str | None = None,
    durable: bool = True,
) -> CopyOutcome:
    """Copy (or move) one run from ``source`` to ``destination``; see the module doc.

    ``destination_name`` is what the tombstone names (a URL without password);
    ``wait_s`` how long to wait for a run under a live lease. Idempotent: a run
    copied before is brought up to date, a run moved before to the same
    destination is ``already-moved``. ``durable=False`` lets the destination
    acknowledge writes before they are durable (PostgreSQL: asynchronous
    commit); the caller must then call ``flush_destination`` before it reports
    the run copied (``copy_runs`` does). A move flushes before its tombstone.

    Raises:
        ConfigError: ``move`` from a store that cannot be fenced (``check_movable``).
        StoreBusyError, StoreUnavailableError: a store did not answer.
    """
    if move:
        check_movable(source)
    if _absent(RunReader(source, run_id)):
        return CopyOutcome(run_id, "skipped", detail=_NO_SUCH_RUN)
    owner = owner or mover_owner()
    src_j: Any = source.journal
    keeper = _Keeper()
    src_lease: Lease | None = None
    if is_leasable(src_j):
        got = _acquire(src_j, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            if (
                isinstance(got, RunMovedError)
                and move
                and got.destination == destination_name
            ):
                return CopyOutcome(
                    run_id, "already-moved", epoch=got.epoch, detail=str(got)
                )
            return CopyOutcome(run_id, "skipped", detail=_refusal("source", got))
        src_lease = got
        keeper.hold(src_j, got)
    try:
        return _copy_locked(
            source,
            destination,
            run_id,
            src_lease,
            keeper,
            move,
            destination_name,
            wait_s,
            verify,
            owner,
            durable,
        )
    finally:
        if src_lease is not None:  # a move turned it into the tombstone already
            _release_quietly(src_j, src_lease)


def _copy_locked(
    source: StorePair,
    destination: StorePair,
    run_id: str,
    src_lease: Lease | None,
    keeper: _Keeper,
    move: bool,
    destination_name: str,
    wait_s: float,
    verify: bool,
    owner: str,
    durable: bool,
) -> CopyOutcome:
    src_j: Any = source.journal
    dst_j: Any = destination.journal
    reader = RunReader(source, run_id)
    if src_lease is not None:
        # The counter is the lease's epoch (L3); a store that reads it may know more.
        source_epoch = max(src_lease.epoch, reader.epoch())
        target = source_epoch + (2 if move else 1)
    else:
        source_epoch = reader.epoch()
        target = source_epoch + 1 if source_epoch else 0
    dst_lease: Lease | None = None
    if is_leasable(dst_j) and not _writes_rows(dst_j):
        got = _acquire(dst_j, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            return CopyOutcome(run_id, "skipped", detail=_refusal("destination", got))
        dst_lease = got
        keeper.hold(dst_j, got)
    try:
        for attempt in (1, 2):
            writer = RunWriter(destination, run_id, dst_lease, keeper)
            writer.durable = durable
            try:
                entries, meta_written, blobs = writer.journal_and_meta(
                    reader.meta_text(), reader.entry_texts(), target, reader.blobs()
                )
                break
            except LeaseHeldError as exc:
                if dst_lease is not None or attempt == 2:
                    # A mover's lease ran out under it (a pause past the ttl):
                    # the re-run resumes from what did land.
                    return CopyOutcome(
                        run_id, "failed", detail=f"the copy lost its lease: {exc}"
                    )
                # A live owner at the destination: wait for it (or report it).
                waited = _destination_ready(dst_j, run_id, owner, wait_s, keeper)
                if isinstance(waited, LeaseHeldError):
                    return CopyOutcome(
                        run_id, "skipped", detail=_refusal("destination", waited)
                    )
        if verify or move:
            problems = verify_run(source, destination, run_id, epoch_at_least=target)
            if problems:
                return CopyOutcome(
                    run_id,
                    "failed",
                    entries,
                    blobs,
                    writer.written_bytes,
                    None,
                    "; ".join(problems),
                )
    except CopyConflictError as exc:
        return CopyOutcome(run_id, "failed", detail=str(exc))
    finally:
        if dst_lease is not None:
            keeper.drop(dst_lease)
            _release_quietly(dst_j, dst_lease)
    epoch: int | None = None
    if is_leasable(dst_j) and target:
        epoch = (
            target
            if writer.rows
            else _raise_epoch_by_leases(dst_j, run_id, target, owner)
        )
    detail = f"{entries} entries, {blobs} blobs" + (", meta" if meta_written else "")
    if not move:
        return CopyOutcome(
            run_id, "copied", entries, blobs, writer.written_bytes, epoch, detail
        )
    assert src_lease is not None  # check_movable: the source is leasable
    if not durable:
        flush_destination(destination)  # the copy is durable before the fence
    keeper.drop(src_lease)
    tombstone = src_j.fence_moved(src_lease, moved_owner(destination_name))
    return CopyOutcome(
        run_id,
        "moved",
        entries,
        blobs,
        writer.written_bytes,
        epoch,
        f"{detail}; source fenced at epoch {tombstone}",
    )
