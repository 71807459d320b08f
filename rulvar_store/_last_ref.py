"""The last ref under a prefix: one index-served read (optional SPI, T12).

A writer that names its blobs so that they sort in the order it wrote them (a
checkpoint id that grows with time) finds its newest blob without a pointer
blob of its own and without listing the run::

    newest = store.last_ref(run_id, run_id + "/ns/")

Detect it with ``has_last_ref``; a store without it is still a full
``TranscriptStore`` and callers fall back to ``list_refs``.

Order: refs compare by code point, the order ``list_refs`` returns (T4) and
the byte order of their UTF-8 text, so a SQL backend answers it with a
backward scan of its ref index wherever the column orders like bytes.

Argument rules (checked before any I/O):

- ``run_id`` follows the read rule (D12).
- ``prefix`` is a str without NUL characters or lone surrogates that starts
  with ``run_id + "/"``: only the run's listed refs are candidates, never its
  slashless ref, never another run's (T3, T4).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol, runtime_checkable

from rulvar_store import _intake
from rulvar_store._protocols import TranscriptStore
from rulvar_store.errors import InvalidArgumentError

__all__ = [
    "AsyncLastRefTranscriptStore",
    "LastRefTranscriptStore",
    "last_ref_args",
    "last_ref_of",
    "prefix_upper_bound",
]

OPERATION: Final = "blob last_ref"

_MAX_CODE_POINT: Final = 0x10FFFF
_SURROGATES: Final = range(0xD800, 0xE000)


@runtime_checkable
class LastRefTranscriptStore(TranscriptStore, Protocol):
    """A blob store that also answers the greatest ref under a prefix."""

    def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref of the run that starts with ``prefix`` (T12)."""
        ...


@runtime_checkable
class AsyncLastRefTranscriptStore(Protocol):
    """``LastRefTranscriptStore``'s ``last_ref`` for asyncio stores."""

    async def last_ref(self, run_id: str, prefix: str) -> str | None:
        """Return the greatest stored ref of the run that starts with ``prefix`` (T12)."""
        ...


def last_ref_args(
    run_id: object, prefix: object, operation: str = OPERATION
) -> tuple[str, str]:
    """Return ``(run_id, prefix)`` once the rules of the module docstring hold.

    ``operation`` names the read in the error (``get_under`` shares the rules).

    Raises:
        InvalidArgumentError: a rule is broken; nothing was read.
    """
    run_id = _intake.run_id_for_read(run_id, operation)
    prefix = _intake.text_for_read(prefix, operation, "prefix")
    if not prefix.startswith(run_id + "/"):
        shown = prefix if len(prefix) <= 80 else prefix[:80] + "..."
        raise InvalidArgumentError(
            f"{operation}: prefix must start with the run id and '/' "
            f"({run_id[:80]!r} + '/'), got {shown!r}",
            operation,
            "prefix",
        )
    return run_id, prefix


def last_ref_of(refs: Iterable[str], prefix: str) -> str | None:
    """The greatest of ``refs`` that starts with ``prefix``, or ``None``.

    The answer for stores that keep their refs in a map (memory).
    """
    found: str | None = None
    for ref in refs:
        if ref.startswith(prefix) and (found is None or ref > found):
            found = ref
    return found


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix``, if any.

    Every ref starting with ``prefix`` lies in ``[prefix, bound)`` in code
    point order, and only those do: SQL backends scan that range of their ref
    index backward. The last code point is raised by one (skipping the
    surrogates, which no stored ref holds); a trailing U+10FFFF cannot be
    raised, so it is dropped and the one before it raised instead. ``None``
    when nothing is left (no upper bound).
    """
    text = prefix
    while text:
        last = ord(text[-1])
        if last < _MAX_CODE_POINT:
            following = last + 1
            if following in _SURROGATES:
                following = _SURROGATES.stop
            return text[:-1] + chr(following)
        text = text[:-1]
    return None
