"""Every blob under a prefix in one read (optional SPI, T13).

A writer that nests a record's parts under the record's own ref (a checkpoint
at ``<run>/c/<id>``, its pending writes at ``<run>/c/<id>/w/<task>``) reads the
record whole in one round trip::

    parts = store.get_under(run_id, run_id + "/c/" + record_id)

Detect it with ``has_get_under``; a store without it is still a full
``TranscriptStore`` and callers fall back to ``list_refs`` and ``get``.

The answer is a list of ``(ref, blob)`` pairs sorted by ref in code point
order (the order ``list_refs`` returns, T4), one per stored blob of the run
whose ref starts with ``prefix``. A prefix is plain text: ``run/c/7`` also
matches ``run/c/70``; a caller that wants one record ends its prefix at a
``/`` or keeps the refs equal to, or under ``/`` of, its record's ref.

Argument rules: exactly T12's (``last_ref_args``), checked before any I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol, runtime_checkable

from rulvar_store._last_ref import last_ref_args
from rulvar_store._protocols import TranscriptStore

__all__ = [
    "AsyncGetUnderTranscriptStore",
    "GetUnderTranscriptStore",
    "blobs_under",
    "get_under_args",
]

OPERATION: Final = "blob get_under"


@runtime_checkable
class GetUnderTranscriptStore(TranscriptStore, Protocol):
    """A blob store that also reads every blob under a prefix at once."""

    def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted by ref (T13)."""
        ...


@runtime_checkable
class AsyncGetUnderTranscriptStore(Protocol):
    """``GetUnderTranscriptStore``'s ``get_under`` for asyncio stores."""

    async def get_under(self, run_id: str, prefix: str) -> list[tuple[str, bytes]]:
        """Return ``(ref, blob)`` of the run's blobs under ``prefix``, sorted by ref (T13)."""
        ...


def get_under_args(run_id: object, prefix: object) -> tuple[str, str]:
    """Return ``(run_id, prefix)`` once T12's argument rules hold, named for this read.

    Raises:
        InvalidArgumentError: a rule is broken; nothing was read.
    """
    return last_ref_args(run_id, prefix, OPERATION)


def blobs_under(
    blobs: Iterable[tuple[str, bytes]], prefix: str
) -> list[tuple[str, bytes]]:
    """The pairs of ``blobs`` whose ref starts with ``prefix``, sorted by ref, copied.

    The answer for stores that keep their blobs in a map (memory).
    """
    return sorted((ref, bytes(blob)) for ref, blob in blobs if ref.startswith(prefix))
