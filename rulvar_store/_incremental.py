"""Incremental reads for observers that poll a live run (optional SPI protocol).

``load`` returns a run's whole journal, so an observer polling a long run pays
O(journal) per poll. A store that also offers ``load_since`` returns only the
entries appended after a cursor that its previous call returned: O(new
entries) per poll.

Protocol (``IncrementalReadStore``; detect it with ``has_incremental_read``)::

    tail = store.load_since(run_id)               # from the start: cursor None
    tail = store.load_since(run_id, tail.cursor)  # later: only what is new

``load_since`` returns a ``JournalTail(entries, cursor, restarted)``:

- ``entries``: the entries appended after ``cursor``, in append order (J2), each
  freshly parsed (D1); ``[]`` when nothing is new (or the run is unknown, J5).
- ``cursor``: an opaque string for the next call. It belongs to one store
  backend and one run; it is never interpreted by callers.
- ``restarted``: True when the cursor's journal no longer exists, because the
  run was deleted (and maybe recreated) since the cursor was issued. The read
  then starts over: ``entries`` is the run's WHOLE current journal, so the
  observer should drop what it had collected and keep these.

Concatenating the ``entries`` of successive calls (starting over on
``restarted``) always gives exactly what ``load`` returns at the time of the
last call. A malformed cursor, or one from another backend, raises
``ContractError``.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from rulvar_store._intake import INT64_MAX
from rulvar_store._protocols import JournalStore
from rulvar_store._records import JournalEntry
from rulvar_store.errors import ContractError

__all__ = ["IncrementalReadStore", "JournalTail", "parse_cursor"]


class JournalTail(NamedTuple):
    """What one ``load_since`` call returns (see the module docstring)."""

    entries: list[JournalEntry]
    cursor: str
    restarted: bool = False


@runtime_checkable
class IncrementalReadStore(JournalStore, Protocol):
    """A journal store that can also return only the entries after a cursor."""

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` and the next cursor."""
        ...


def parse_cursor(
    cursor: object, backend: str, fields: int, bound: int | None = INT64_MAX
) -> list[int] | None:
    """Split ``"<backend>:<int>:<int>..."`` into its ``fields`` integers.

    ``None`` means "from the start". Anything else that is not such a string,
    or a position above ``bound`` (a database binds positions as 64-bit
    integers; ``None`` for a store that compares them in Python only), raises
    ``ContractError``.
    """
    if cursor is None:
        return None
    parts = cursor.split(":") if isinstance(cursor, str) else []
    if len(parts) != fields + 1 or parts[0] != backend:
        raise ContractError(
            f"load_since: {cursor!r} is not a cursor of the {backend} store"
        )
    try:
        values = [int(part) for part in parts[1:]]
    except ValueError:
        raise ContractError(
            f"load_since: {cursor!r} is not a cursor of the {backend} store"
        ) from None
    if any(value < 0 for value in values):
        raise ContractError(f"load_since: {cursor!r} holds a negative position")
    if bound is not None and any(value > bound for value in values):
        raise ContractError(
            f"load_since: {cursor!r} holds a position above {bound}, which no "
            f"cursor of the {backend} store carries"
        )
    return values
