"""In-memory reference stores: the honest, fenced positive control of the kit.

One ``MemoryStore`` is one fencing domain inside one process. Every method holds
the domain's lock for its whole check-and-mutate unit, which is what makes the
fence atomic here (L7); other handles on the same domain (``MemoryStore.sharing``)
see the same journals, metas, leases, epochs and blobs.

A handle used in a forked child refuses with ``ForkedStoreError`` (Y4) before
taking its lock: the child holds a private copy of the domain, so its writes
would vanish for the parent, and a lock another thread held at the fork is
never released in the child.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import Literal, final

from rulvar_store import _intake
from rulvar_store._batch import BlobBatch, blob_batch
from rulvar_store._fork import ForkGuard, holding
from rulvar_store._get_under import blobs_under, get_under_args
from rulvar_store._incremental import JournalTail, parse_cursor
from rulvar_store._instrument import instrumented
from rulvar_store._json import load_listing, load_record, load_records
from rulvar_store._last_ref import last_ref_args, last_ref_of
from rulvar_store._move_conflict import copy_blobs, copy_conflict, distinct_runs
from rulvar_store._moved import NEVER_EXPIRES_MS, refuse_if_moved
from rulvar_store._records import (
    DEFAULT_LEASE_TTL_MS,
    BlobInput,
    Clock,
    JournalEntry,
    Lease,
    RunFilter,
    RunMeta,
    finite_seq,
    meta_matches_filter,
    system_clock_ms,
    validate_ttl_ms,
)
from rulvar_store._run_match import check_run_match, held_by
from rulvar_store._telemetry import Observed, TelemetryTarget, note
from rulvar_store.errors import JournalOrderViolation, LeaseHeldError, StoreClosedError

__all__ = ["MemoryFencedTranscriptStore", "MemoryStore", "MemoryTranscriptStore"]


_INCARNATIONS = count(1)


def _refuse_closed(closed: bool, operation: str) -> None:
    if closed:
        raise StoreClosedError(f"memory {operation}: the store is closed", operation)


@dataclass(slots=True)
class _LeaseRow:
    owner: str
    epoch: int
    expires_at: int


@dataclass(slots=True)
class _MemoryDomain:
    """Everything one fencing domain holds; guarded by ``lock``."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    # (serialized entry text, its finite seq or None), in append order.
    entries: dict[str, list[tuple[str, int | float | None]]] = field(
        default_factory=dict
    )
    # A number per journal, new each time a run's journal is (re)created, so an
    # incremental-read cursor can tell a recreated run from the one it read.
    incarnations: dict[str, int] = field(default_factory=dict)
    metas: dict[str, str] = field(default_factory=dict)
    leases: dict[str, _LeaseRow] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


MEMORY_TARGET = TelemetryTarget("rulvar.memory")


def _memory_target(store: object) -> TelemetryTarget:
    return MEMORY_TARGET


@final
@instrumented(_memory_target, role="journal")
class MemoryStore(Observed):
    """Leasable, fenced, meta-lookup journal store held in process memory.

    Safe across threads. ``now`` and ``ttl_ms`` are injectable for tests (D8, D9).
    """

    fenced_writes: Literal[True] = True

    def __init__(
        self,
        *,
        ttl_ms: int = DEFAULT_LEASE_TTL_MS,
        now: Clock | None = None,
        _domain: _MemoryDomain | None = None,
    ) -> None:
        self.lease_ttl_ms: int = validate_ttl_ms(ttl_ms)
        self._now: Clock = now if now is not None else system_clock_ms
        self._domain = _domain if _domain is not None else _MemoryDomain()
        self._twin: MemoryFencedTranscriptStore | None = None
        self._closed = False
        self._fork = ForkGuard("memory")

    @classmethod
    def sharing(
        cls, other: MemoryStore, *, ttl_ms: int | None = None, now: Clock | None = None
    ) -> MemoryStore:
        """Return a second handle on ``other``'s domain, with its own clock and ttl."""
        return cls(
            ttl_ms=other.lease_ttl_ms if ttl_ms is None else ttl_ms,
            now=now if now is not None else other._now,
            _domain=other._domain,
        )

    def transcripts(self) -> MemoryFencedTranscriptStore:
        """Return the memoized fenced blob twin sharing this store's domain (T6, T7)."""
        with self._entered("transcripts"):
            if self._twin is None:
                self._twin = MemoryFencedTranscriptStore(self)
            return self._twin

    def close(self) -> None:
        """End this handle (and its twin); later calls raise ``StoreClosedError``.

        The domain's data stays for other handles sharing it. Idempotent.
        """
        self._closed = True

    @contextmanager
    def _entered(self, operation: str) -> Iterator[None]:
        """Hold the domain's lock for ``operation`` on an open handle of this process."""
        with holding(self._fork, self._domain.lock, operation):
            _refuse_closed(self._closed, operation)
            yield

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- fencing ---------------------------------------------------------------

    def _assert_fencing(self, lease: Lease) -> None:
        """Raise unless ``lease`` is the live lease of its run (L6).

        The one seam through which every fenced operation checks; callers hold the
        domain lock, so nothing can land between this check and their mutation.
        """
        row = self._domain.leases.get(lease.run_id)
        if (
            row is None
            or row.expires_at <= self._now()
            or row.owner != lease.owner
            or row.epoch != lease.epoch
        ):
            raise LeaseHeldError(
                f"lease of run {lease.run_id!r} (owner {lease.owner!r}, epoch "
                f"{lease.epoch}) is not the live lease",
                lease.run_id,
                lease.owner,
                lease.epoch,
            )

    # -- journal ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append one entry; J7 order: run match, fence, then the J6 seq guard."""
        _intake.run_id_for_write(run_id, "append")
        text = _intake.entry_text(entry)
        check_run_match(_intake.lease_or_none(lease, "append"), run_id, "append")
        seq = finite_seq(entry)
        with self._entered("append"):
            if lease is not None:
                self._assert_fencing(lease)
            journal = self._domain.entries.get(run_id)
            if journal is None:
                journal = self._domain.entries[run_id] = []
                self._domain.incarnations[run_id] = next(_INCARNATIONS)
            if seq is not None and any(
                stored is not None and stored >= seq for _, stored in journal
            ):
                raise JournalOrderViolation(
                    f"append to run {run_id!r}: seq {seq} is not above the stored tail",
                    run_id,
                    seq,
                )
            journal.append((text, seq))

    def load(self, run_id: str) -> list[JournalEntry]:
        _intake.run_id_for_read(run_id, "load")
        with self._entered("load"):
            texts = [text for text, _ in self._domain.entries.get(run_id, [])]
        return load_records(texts)

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` (``_incremental``).

        The cursor holds the journal's incarnation and how many entries were
        read; a different incarnation means the run was deleted since.
        """
        position = parse_cursor(cursor, "memory", 2)
        with self._entered("load_since"):
            journal = self._domain.entries.get(run_id, [])
            incarnation = self._domain.incarnations.get(run_id, 0) if journal else 0
            start, restarted = 0, False
            if position is not None and position != [0, 0]:
                seen_incarnation, seen = position
                if seen_incarnation == incarnation and seen <= len(journal):
                    start = seen
                else:
                    restarted = True
            texts = [text for text, _ in journal[start:]]
            next_cursor = f"memory:{incarnation}:{len(journal)}"
        return JournalTail(load_records(texts), next_cursor, restarted)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        run_id, text = _intake.meta_text(meta)
        check_run_match(_intake.lease_or_none(lease, "put_meta"), run_id, "put_meta")
        with self._entered("put_meta"):
            if lease is not None:
                self._assert_fencing(lease)
            self._domain.metas[run_id] = text

    def get_meta(self, run_id: str) -> RunMeta | None:
        _intake.run_id_for_read(run_id, "get_meta")
        with self._entered("get_meta"):
            text = self._domain.metas.get(run_id)
        return None if text is None else load_record(text)

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        run_filter = _intake.run_filter(run_filter)
        with self._entered("list_runs"):
            texts = [self._domain.metas[key] for key in sorted(self._domain.metas)]
        return load_listing(texts, lambda meta: meta_matches_filter(meta, run_filter))

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove entries, meta and lease row together; the epoch counter stays (L5)."""
        _intake.run_id_for_read(run_id, "delete")
        check_run_match(_intake.lease_or_none(lease, "delete"), run_id, "delete")
        with self._entered("delete"):
            if lease is not None:
                self._assert_fencing(lease)
            self._domain.entries.pop(run_id, None)
            self._domain.metas.pop(run_id, None)
            self._domain.leases.pop(run_id, None)

    # -- leases ----------------------------------------------------------------

    def acquire(self, run_id: str, owner: str) -> Lease:
        _intake.run_id_for_write(run_id, "acquire")
        _intake.owner_for_write(owner, "acquire")
        with self._entered("acquire"):
            now = self._now()
            row = self._domain.leases.get(run_id)
            if row is not None and row.expires_at > now:
                refuse_if_moved(run_id, row.owner, row.epoch)
                raise held_by(run_id, row.owner, row.epoch, row.expires_at - now)
            epoch = self._domain.epochs.get(run_id, 0) + 1
            self._domain.epochs[run_id] = epoch
            self._domain.leases[run_id] = _LeaseRow(
                owner, epoch, now + self.lease_ttl_ms
            )
            if row is not None:  # an expired lease, never released: a takeover
                note(self, "leases_taken_over")
            return Lease(run_id, owner, epoch)

    def renew(self, lease: Lease) -> None:
        _intake.require_lease(lease, "renew")
        with self._entered("renew"):
            self._assert_fencing(lease)
            self._domain.leases[lease.run_id].expires_at = (
                self._now() + self.lease_ttl_ms
            )

    def release(self, lease: Lease) -> None:
        _intake.require_lease(lease, "release")
        with self._entered("release"):
            self._assert_fencing(lease)
            del self._domain.leases[lease.run_id]

    # -- copies (rulvar_store._move_rows) --------------------------------------

    def entry_rows(self, run_id: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (position, entry text) pairs after ``after`` (1-based)."""
        _intake.run_id_for_read(run_id, "entry_rows")
        with self._entered("entry_rows"):
            journal = self._domain.entries.get(run_id, [])
            page = journal[after : after + limit]
        return [(after + 1 + i, text) for i, (text, _) in enumerate(page)]

    def entry_count(self, run_id: str) -> int:
        _intake.run_id_for_read(run_id, "entry_count")
        with self._entered("entry_count"):
            return len(self._domain.entries.get(run_id, []))

    def meta_row(self, run_id: str) -> str | None:
        _intake.run_id_for_read(run_id, "meta_row")
        with self._entered("meta_row"):
            return self._domain.metas.get(run_id)

    def epoch_counter(self, run_id: str) -> int:
        _intake.run_id_for_read(run_id, "epoch_counter")
        with self._entered("epoch_counter"):
            row = self._domain.leases.get(run_id)
            held = row.epoch if row is not None else 0
            return max(self._domain.epochs.get(run_id, 0), held)

    def write_rows(
        self,
        run_id: str,
        lease: Lease | None,
        *,
        expected_entries: int,
        entries: Sequence[str],
        meta: str | None,
        epoch: int,
        blobs: Sequence[tuple[str, bytes]] = (),
        durable: bool = True,
    ) -> None:
        """Entry texts, meta text, blobs and an epoch floor in one unit (``_move_rows``)."""
        _intake.run_id_for_write(run_id, "write_rows")
        check_run_match(
            _intake.lease_or_none(lease, "write_rows"), run_id, "write_rows"
        )
        rows = [(text, finite_seq(load_record(text))) for text in entries]
        pairs = copy_blobs(run_id, blobs)
        with self._entered("write_rows"):
            if lease is not None:
                self._assert_fencing(lease)
            else:
                self._refuse_live(run_id, "write_rows")
            journal = self._domain.entries.get(run_id, [])
            if len(journal) != expected_entries:
                raise copy_conflict(run_id, expected_entries, len(journal))
            if rows:
                if not journal:
                    self._domain.entries[run_id] = journal
                    self._domain.incarnations[run_id] = next(_INCARNATIONS)
                journal.extend(rows)
            if meta is not None:
                self._domain.metas[run_id] = meta
            for ref, data in pairs:
                self._domain.blobs[ref] = data
            if epoch > self._domain.epochs.get(run_id, 0):
                self._domain.epochs[run_id] = epoch

    def write_runs(
        self,
        items: Sequence[
            tuple[str, Sequence[str], str | None, int, Sequence[tuple[str, bytes]]]
        ],
        *,
        durable: bool = True,
    ) -> None:
        """Several new runs in one unit (``_move_rows.write_runs``): all or none."""
        distinct_runs([item[0] for item in items])
        checked = []
        for run_id, entries, meta, epoch, blobs in items:
            _intake.run_id_for_write(run_id, "write_runs")
            rows = [(text, finite_seq(load_record(text))) for text in entries]
            checked.append((run_id, rows, meta, epoch, copy_blobs(run_id, blobs)))
        with self._entered("write_runs"):
            for run_id, *_ in checked:
                self._refuse_live(run_id, "write_runs")
                held = len(self._domain.entries.get(run_id, []))
                if held:
                    raise copy_conflict(run_id, 0, held)
            for run_id, rows, meta, epoch, pairs in checked:
                if rows:
                    self._domain.entries[run_id] = list(rows)
                    self._domain.incarnations[run_id] = next(_INCARNATIONS)
                if meta is not None:
                    self._domain.metas[run_id] = meta
                for ref, data in pairs:
                    self._domain.blobs[ref] = data
                if epoch > self._domain.epochs.get(run_id, 0):
                    self._domain.epochs[run_id] = epoch

    def flush_writes(self) -> None:
        """A durability barrier; memory has nothing to flush (``_move_rows``)."""

    def _refuse_live(self, run_id: str, operation: str) -> None:
        """An unleased copy write never lands under a live owner (``write_rows``)."""
        row = self._domain.leases.get(run_id)
        if row is not None and row.expires_at > self._now():
            refuse_if_moved(run_id, row.owner, row.epoch)
            raise LeaseHeldError(
                f"{operation} of run {run_id!r}: leased by {row.owner!r} "
                f"(epoch {row.epoch})",
                run_id,
                row.owner,
                row.epoch,
            )

    def orphan_page(self, kind: str, after: str | None, limit: int) -> list[str]:
        """Run ids after ``after`` of orphan journals or blobs (``_orphans``)."""
        with self._entered("orphan_page"):
            domain = self._domain
            if kind == "journal":
                found = {r for r, rows in domain.entries.items() if rows} - set(
                    domain.metas
                )
            else:
                blobs = {ref.split("/", 1)[0] for ref in domain.blobs}
                found = (
                    blobs
                    - set(domain.metas)
                    - {r for r, rows in domain.entries.items() if rows}
                )
        return sorted(r for r in found if after is None or r > after)[:limit]

    def fence_moved(self, lease: Lease, owner: str) -> int:
        """Turn the live ``lease`` into the moved-run tombstone (``_moved``)."""
        _intake.require_lease(lease, "fence_moved")
        _intake.owner_for_write(owner, "fence_moved")
        with self._entered("fence_moved"):
            self._assert_fencing(lease)
            epoch = max(self._domain.epochs.get(lease.run_id, 0), lease.epoch) + 1
            self._domain.epochs[lease.run_id] = epoch
            self._domain.leases[lease.run_id] = _LeaseRow(
                owner, epoch, NEVER_EXPIRES_MS
            )
            return epoch


@final
@instrumented(_memory_target, role="blobs")
class MemoryFencedTranscriptStore(Observed):
    """Blob twin of a ``MemoryStore``: same domain, so leased writes are fenced (T6)."""

    fenced_writes: Literal[True] = True

    def __init__(self, journal: MemoryStore) -> None:
        self._journal = journal
        self._domain = journal._domain

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        check_run_match(_intake.lease_or_none(lease, "blob put"), run_id, "blob put")
        # Copied now: a later mutation must not leak in (D3).
        data = _intake.blob_bytes(blob, "blob put")
        with self._journal._entered("blob put"):
            if lease is not None:
                self._journal._assert_fencing(lease)
            self._domain.blobs[ref] = data

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run under one fence check (T11)."""
        batch = blob_batch(items, lease)
        if not batch.items:
            return
        with self._journal._entered("blob put_many"):
            if batch.lease is not None:
                self._journal._assert_fencing(batch.lease)
            self._domain.blobs.update(batch.items)

    def get(self, ref: str) -> bytes | None:
        _intake.ref_for_read(ref, "blob get")
        with self._journal._entered("blob get"):
            return self._domain.blobs.get(ref)

    def list_refs(self, run_id: str) -> list[str]:
        prefix = _intake.run_id_for_read(run_id, "blob list_refs") + "/"
        with self._journal._entered("blob list_refs"):
            return sorted(ref for ref in self._domain.blobs if ref.startswith(prefix))

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12)."""
        _, prefix = last_ref_args(run_id, prefix)
        with self._journal._entered("blob last_ref"):
            return last_ref_of(self._domain.blobs, prefix)

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13)."""
        _, prefix = get_under_args(run_id, prefix)
        with self._journal._entered("blob get_under"):
            return blobs_under(self._domain.blobs.items(), prefix)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        check_run_match(
            _intake.lease_or_none(lease, "blob delete"), run_id, "blob delete"
        )
        with self._journal._entered("blob delete"):
            if lease is not None:
                self._journal._assert_fencing(lease)
            self._domain.blobs.pop(ref, None)

    def close(self) -> None:
        """Closing the journal store is what ends the domain; nothing to do here."""


@final
@instrumented(_memory_target, role="blobs")
class MemoryTranscriptStore(Observed):
    """Single-writer blob store in memory; ignores leases and declares no fence (T8)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[str, bytes] = {}
        self._closed = False
        self._fork = ForkGuard("memory blobs")

    @contextmanager
    def _entered(self, operation: str) -> Iterator[None]:
        """Hold the lock for ``operation`` on an open handle of this process."""
        with holding(self._fork, self._lock, operation):
            _refuse_closed(self._closed, operation)
            yield

    def put(self, ref: str, blob: BlobInput, lease: Lease | None = None) -> None:
        ref, _ = _intake.ref_for_write(ref, "blob put")
        _intake.lease_or_none(lease, "blob put")
        data = _intake.blob_bytes(blob, "blob put")
        with self._entered("blob put"):
            self._blobs[ref] = data

    def put_many(self, items: BlobBatch, lease: Lease | None = None) -> None:
        """Store every ``(ref, blob)`` of one run at once; ``lease`` is only type-checked."""
        batch = blob_batch(items, lease)
        if not batch.items:
            return
        with self._entered("blob put_many"):
            self._blobs.update(batch.items)

    def get(self, ref: str) -> bytes | None:
        _intake.ref_for_read(ref, "blob get")
        with self._entered("blob get"):
            return self._blobs.get(ref)

    def list_refs(self, run_id: str) -> list[str]:
        prefix = _intake.run_id_for_read(run_id, "blob list_refs") + "/"
        with self._entered("blob list_refs"):
            return sorted(ref for ref in self._blobs if ref.startswith(prefix))

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref that starts with ``prefix`` (T12)."""
        _, prefix = last_ref_args(run_id, prefix)
        with self._entered("blob last_ref"):
            return last_ref_of(self._blobs, prefix)

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted (T13)."""
        _, prefix = get_under_args(run_id, prefix)
        with self._entered("blob get_under"):
            return blobs_under(self._blobs.items(), prefix)

    def delete(self, ref: str, lease: Lease | None = None) -> None:
        _intake.ref_for_read(ref, "blob delete")
        _intake.lease_or_none(lease, "blob delete")
        with self._entered("blob delete"):
            self._blobs.pop(ref, None)

    def close(self) -> None:
        """Later calls raise ``StoreClosedError``; idempotent."""
        self._closed = True
