"""The store's final state after a soak, read once into a plain record the referee judges.

The referee and the companion check are pure functions of the writers' logs and
this record: they never hold a store handle, so what they judge is exactly what
was read, once, after every writer had stopped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rulvar_store import MetaLookupStore, TranscriptStore

__all__ = ["FinalState", "RunState", "read_final_state"]


@dataclass(frozen=True)
class RunState:
    """One run as stored: its entries in order, its meta, and each blob's bytes."""

    entries: tuple[Mapping[str, Any], ...] = ()
    meta: Any = None
    blobs: Mapping[str, bytes | None] = field(default_factory=dict)


@dataclass(frozen=True)
class FinalState:
    """Every run the soak judges; a run never read is absent, not empty."""

    runs: Mapping[str, RunState]

    def run(self, run_id: str) -> RunState:
        """The run as stored.

        Raises:
            KeyError: the run was not read into this snapshot (a referee bug).
        """
        return self.runs[run_id]


def read_final_state(
    journal: MetaLookupStore, blobs: TranscriptStore, run_ids: Iterable[str]
) -> FinalState:
    """Read ``run_ids`` (entries, meta, every listed blob) from the store, once each."""
    runs: dict[str, RunState] = {}
    for run_id in dict.fromkeys(run_ids):
        refs = sorted(blobs.list_refs(run_id))
        runs[run_id] = RunState(
            entries=tuple(journal.load(run_id)),
            meta=journal.get_meta(run_id),
            blobs={ref: blobs.get(ref) for ref in refs},
        )
    return FinalState(runs)
