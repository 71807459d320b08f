"""Broken in-memory stores the operator tools trip over (issue 22, class 4).

Each is the real ``MemoryStore`` (or its blob twin) with one plausible bug in
a call ``rulvar_store.ops`` relies on; open them through
``_broken_memory_races.memory_locations``. ``UnfencedMetaAndBlobs`` of
``_broken_memory_races`` is the fourth (a blob delete that ignores its lease).
"""

from __future__ import annotations

from rulvar_store import (
    JournalEntry,
    Lease,
    MemoryFencedTranscriptStore,
    MemoryStore,
    RunMeta,
)
from rulvar_store.backend import dump_record, load_record

__all__ = [
    "MetaDropsUnknownKeys",
    "PrefixBlobDelete",
    "PrefixListRefs",
    "ReadStampsMeta",
]


class ReadStampsMeta(MemoryStore):  # type: ignore[misc]  # final; the bug is the point
    """``load`` stamps the run's meta with the time it was last read ("for the UI").

    A read that writes: an audit, which only reads, changes every run it sees.
    """

    def load(self, run_id: str) -> list[JournalEntry]:
        entries = super().load(run_id)
        with self._domain.lock:
            text = self._domain.metas.get(run_id)
            if text is not None:
                stamped = {**load_record(text), "lastReadAt": self._now()}
                self._domain.metas[run_id] = dump_record(stamped)
        return entries


class _PrefixListTwin(MemoryFencedTranscriptStore):  # type: ignore[misc]  # final
    def list_refs(self, run_id: str) -> list[str]:
        with self._domain.lock:  # the bug: no "/" after the run id
            return sorted(ref for ref in self._domain.blobs if ref.startswith(run_id))


class PrefixListRefs(MemoryStore):  # type: ignore[misc]  # final
    """``list_refs(run)`` matches the run id as a bare prefix: ``run-1`` lists ``run-10/...``.

    A delete sweep of one run then reaches for a neighbour's blobs: its lease
    names another run, so the sweep is refused half done (blobs gone, journal
    kept), and without a lease it would delete them.
    """

    def transcripts(self) -> MemoryFencedTranscriptStore:
        return _PrefixListTwin(self)


class _PrefixDeleteTwin(MemoryFencedTranscriptStore):  # type: ignore[misc]  # final
    def delete(self, ref: str, lease: Lease | None = None) -> None:
        with self._domain.lock:  # the bug: LIKE 'ref%' instead of = 'ref'
            doomed = [stored for stored in self._domain.blobs if stored.startswith(ref)]
        for stored in doomed:
            super().delete(stored, lease)


class PrefixBlobDelete(MemoryStore):  # type: ignore[misc]  # final
    """A blob delete removes every ref that starts with the given one.

    A prune of ``run/ckpt/1`` also deletes the still referenced ``run/ckpt/10``.
    """

    def transcripts(self) -> MemoryFencedTranscriptStore:
        return _PrefixDeleteTwin(self)


class MetaDropsUnknownKeys(MemoryStore):  # type: ignore[misc]  # final; the bug is the point
    """``put_meta`` keeps only the keys it has columns for (a fixed-column meta table).

    Every read of a meta it wrote looks whole to its writer's tests; a repair,
    which must rewrite status and ``updatedAt`` only, silently drops the host's
    own keys (A4).
    """

    _COLUMNS = frozenset({"runId", "status", "name", "segments", "updatedAt"})

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        known = {key: value for key, value in meta.items() if key in self._COLUMNS}
        super().put_meta(known, lease)
