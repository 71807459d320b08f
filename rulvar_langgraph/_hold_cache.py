"""What a hold remembers of its thread, for its own lifetime only.

While a hold's lease is live, only that lease can write the thread: what the
hold last wrote or read is what the store has. So a held ``put`` needs no read
of the namespace pointer and a held ``put_writes`` no read of the writes blob.
A superseded hold's memory may be stale, but its writes are refused by the
fence anyway, so a stale value can never land.

Bounded: one pointer and one writes list per namespace the hold wrote; dropped
when the hold ends and cleared by the saver's own deletes, prunes and copies
into the thread. An entry is removed before each write and set again only once
the write succeeded, so an unknown outcome (a lost connection) reads afresh.

The memory belongs to the saver that made the hold, and is used only for
writes that carry that hold's lease through that saver. A hold's config handed
to a second saver object lets that saver write under the same lease behind
this memory's back; a config is meant for the saver that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rulvar_langgraph._pending import PendingWrites
from rulvar_store import Lease

__all__ = ["HoldCache"]


@dataclass(slots=True)
class HoldCache:
    """One hold's view of its thread: the latest pointer and writes per namespace."""

    lease: Lease
    pointers: dict[str, str] = field(default_factory=dict)
    """Namespace -> the checkpoint id its pointer names."""
    writes: dict[str, tuple[str, PendingWrites]] = field(default_factory=dict)
    """Namespace -> (checkpoint id, its stored writes): the latest written only."""

    def clear(self) -> None:
        """Forget everything: the thread changed by other means than put."""
        self.pointers.clear()
        self.writes.clear()
