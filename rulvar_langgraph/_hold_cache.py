"""What a hold remembers of its thread, for its own lifetime only.

While a hold's lease is live, only that lease can write the thread: what the
hold last wrote or read is what the store has. So a held ``put`` needs no read
of the namespace's newest checkpoint, and a held ``put_writes`` no read of the task's
writes blob on the checkpoint it last wrote or read, or on one the hold just
created (a checkpoint newer than any in its namespace has no writes yet).
A superseded hold's memory may be stale, but its writes are refused by the
fence anyway, so a stale value can never land.

LangGraph's default durability (``"async"``) stores checkpoints in order but
pending writes in the background, unordered against them: ``put_writes`` on
C1 may land before ``put(C0)`` and ``put(C1)``. So "a checkpoint the hold just
created has no writes" holds only for an id under which no write was stored:
the hold keeps the ids it stored writes under (added BEFORE each write, so an
unknown outcome counts) and the ids that already had writes above the
namespace's newest checkpoint when the hold first read it. A new checkpoint
with one of those ids is not assumed empty: its writes are read afresh.

Bounded: one checkpoint id and its writes (by task) per namespace the hold wrote,
plus the ids (no values) with writes above the namespace's newest checkpoint
(a new checkpoint drops those at or below it: only a newer one is ever
assumed empty); dropped when the hold ends.
The values are cleared by the saver's own deletes, prunes and copies into the
thread (the ids are kept: a kept id only costs a read). An entry is removed
before each write and set again only once the write succeeded, so an unknown
outcome (a lost connection) reads afresh.

The memory belongs to the saver that made the hold, and is used only for
writes that carry that hold's lease through that saver. The hold's config names
that saver (``HOLDER_KEY``), and any other saver object refuses to write with
it, so no write under the lease can land behind this memory's back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from rulvar_langgraph._pending import PendingWrites
from rulvar_store import Lease, RunMeta

__all__ = ["NO_CHECKPOINT", "HoldCache", "TaskWrites"]

TaskWrites: TypeAlias = dict[str, PendingWrites]
"""Task id -> the writes stored in that task's blob."""

NO_CHECKPOINT: Final = ""
"""A ``latest`` value meaning "the hold read this namespace and it has no checkpoint"
(checkpoint ids are non-empty safe tokens, so it cannot name one)."""


@dataclass(slots=True)
class HoldCache:
    """One hold's view of its thread: the newest checkpoint and writes per namespace."""

    lease: Lease
    latest: dict[str, str] = field(default_factory=dict)
    """Namespace -> its newest checkpoint's id (or ``NO_CHECKPOINT``)."""
    writes: dict[str, tuple[str, TaskWrites]] = field(default_factory=dict)
    """Namespace -> (checkpoint id, ALL its stored writes by task): the latest only."""
    meta: RunMeta | None = None
    """The thread's meta as this hold wrote it (a thread it started), so its end
    merges its outcome without reading the meta back; ``None``: read it."""
    queue_writes: bool = True
    """Whether the hold's task writes wait for the write that follows them
    (the step's checkpoint) to share its COMMIT: on until one waits in vain,
    as under a caller that writes one call after another."""
    with_writes: set[tuple[str, str]] = field(default_factory=set)
    """(namespace, checkpoint id) pairs that have (or may have) stored writes: the
    hold's own, and those found above the newest checkpoint when it read a listing."""

    def writing(self, checkpoint_ns: str, checkpoint_id: str) -> None:
        """The hold is about to store writes under the id (whatever the outcome)."""
        self.with_writes.add((checkpoint_ns, checkpoint_id))

    def listed(self, checkpoint_ns: str, ids_with_writes: Iterable[str]) -> None:
        """A listing showed writes under these ids (above the newest checkpoint)."""
        self.with_writes.update((checkpoint_ns, cid) for cid in ids_with_writes)

    def known_writes(self, checkpoint_ns: str, checkpoint_id: str) -> TaskWrites | None:
        """Every stored write of that checkpoint by task, if it is the one remembered."""
        known = self.writes.get(checkpoint_ns)
        return known[1] if known is not None and known[0] == checkpoint_id else None

    def new_checkpoint(self, checkpoint_ns: str, checkpoint_id: str) -> None:
        """The hold just stored a checkpoint newer than any in the namespace.

        Nobody but this hold can have stored writes against it since the hold
        first read the namespace, and writes stored before that were noted then:
        so an id in neither ``with_writes`` nor the memory has none. One in
        ``with_writes`` but not remembered is forgotten: the next write or
        read of it goes to the store.
        """
        if self.known_writes(checkpoint_ns, checkpoint_id) is None:
            if (checkpoint_ns, checkpoint_id) in self.with_writes:
                self.writes.pop(checkpoint_ns, None)
            else:
                self.writes[checkpoint_ns] = (checkpoint_id, {})
        # Only ids above the namespace's newest checkpoint can be assumed empty
        # later (after a delete or prune the next listing notes ids again).
        self.with_writes = {
            (ns, cid)
            for ns, cid in self.with_writes
            if ns != checkpoint_ns or cid > checkpoint_id
        }

    def clear(self) -> None:
        """Forget the values: the thread changed by other means than put.

        ``with_writes`` stays: an id wrongly kept there costs one read, an id
        wrongly dropped would lose writes. Ids a copy brings in are noted by
        the next listing, which the emptied ``latest`` forces.
        """
        self.latest.clear()
        self.writes.clear()
        self.meta = None
