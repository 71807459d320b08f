"""One run read from a store, and written into one, as stored rows where offered.

``RunReader`` yields a run's entry texts page by page (``entry_rows``) or from
``load``, its meta text and its blobs; ``RunWriter`` writes what a destination
lacks of them in bounded batches: over the row abilities a fresh destination is
written without a read first (``_fresh``), otherwise what it holds must be a
prefix of the source (``CopyConflictError``). ``verify_run`` compares both ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Final, cast

from rulvar_store._batch import BatchTranscriptStore
from rulvar_store._capabilities import has_batch_put
from rulvar_store._json import dump_record, load_record
from rulvar_store._move_base import (
    _PAGE,
    BATCH_BYTES,
    BATCH_ENTRIES,
    StorePair,
    _Keeper,
)
from rulvar_store._move_rows import has_run_rows, has_run_rows_writer
from rulvar_store._records import Lease
from rulvar_store.errors import CopyConflictError

__all__ = ["RunReader", "RunWriter", "run_digest", "verify_run"]


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


_NO_SUCH_RUN: Final = "no such run at the source (no meta, entries or blobs)"


def _absent(reader: RunReader) -> bool:
    """Whether the source holds nothing of the run (a mistyped --run, say)."""
    return (
        reader.meta_text() is None and reader.entry_count() == 0 and not reader.refs()
    )
