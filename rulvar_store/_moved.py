"""The moved-run tombstone: a lease row no owner can outlive, naming the destination.

``rulvar runs move`` fences the source copy of a run with an ordinary lease row,
so the database formats stay the ones the TypeScript stores share (CONTRACT
Appendix S and P): the row's epoch is above every epoch the source ever granted,
its owner is the reserved string ``rulvar-moved:<destination URL, no password>``
and its ``expires_at`` is the largest BIGINT, a time that never comes. Every
implementation therefore sees the run as leased forever: a source owner's next
write is refused by the fence it already checks (L6), and a new acquire finds a
live lease (L1). Python stores go one step further and say where the run went:
their acquire calls ``refuse_if_moved`` on the live row it found, which raises
the typed, non-retryable ``RunMovedError`` (V4).
"""

from __future__ import annotations

from typing import Final

from rulvar_store._intake import MAX_OWNER_LENGTH
from rulvar_store.errors import RunMovedError

__all__ = [
    "MOVED_OWNER_PREFIX",
    "NEVER_EXPIRES_MS",
    "moved_destination",
    "moved_owner",
    "refuse_if_moved",
]

MOVED_OWNER_PREFIX: Final = "rulvar-moved:"
# The largest PostgreSQL BIGINT and SQLite INTEGER: the tombstone's expiry. Every
# lease clock reads Unix milliseconds, so ``expires_at > now`` holds for ~292
# million years, in Python, SQL and JavaScript (as a double, 9.22e18) alike.
NEVER_EXPIRES_MS: Final = 2**63 - 1


def moved_owner(destination: str) -> str:
    """The tombstone's owner string for ``destination`` (a URL already redacted).

    Cut to the owner length bound (D10); control characters, which an owner may
    not hold, become ``?``.
    """
    clean = "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in destination)
    return (MOVED_OWNER_PREFIX + clean)[:MAX_OWNER_LENGTH]


def moved_destination(owner: str | None) -> str | None:
    """Return the destination a tombstone's owner names, or ``None`` for any other owner."""
    if owner is None or not owner.startswith(MOVED_OWNER_PREFIX):
        return None
    return owner[len(MOVED_OWNER_PREFIX) :]


def refuse_if_moved(run_id: str, owner: str | None, epoch: int | None) -> None:
    """Raise ``RunMovedError`` when the live lease an acquire found is a tombstone.

    Called by every backend's acquire in its live-lease branch, before it raises
    the ordinary ``LeaseHeldError``.
    """
    destination = moved_destination(owner)
    if destination is not None:
        raise RunMovedError(
            f"run {run_id!r} was moved to {destination}: acquire it there "
            f"(this store keeps a tombstone at epoch {epoch})",
            run_id,
            owner,
            epoch,
            destination,
        )
