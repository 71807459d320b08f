"""The arguments of ``brief_put`` (L16), checked the same way by every backend.

``brief_put(owner, ref, blob, under, tail, meta, meta_replaces, need_prior)``
is one blob put under a brief lease, in one transaction: what an unheld
LangGraph ``put`` needs. A stored ref counts as prior when it starts with
``under`` and the rest of it matches the regular expression ``tail``
(searched, so anchor it with ``^`` and ``$``). Only the expression's common
core (classes, groups, ``?``, ``*``, ``+``, anchors) means the same to
PostgreSQL's POSIX matcher and to Python's ``re``, which the SQLite store
uses.

Argument rules (checked before any I/O): ``ref`` follows the blob write rule
and names the run; ``owner`` the acquire rule; ``under`` starts with that
run's id and ``/`` (``last_ref``'s rule); ``tail`` is a str that compiles as
a regular expression; ``meta``, when given, is a meta record of the same run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, final

from rulvar_store import _intake
from rulvar_store._last_ref import last_ref_args, prefix_upper_bound
from rulvar_store.errors import InvalidArgumentError

__all__ = ["BriefPutArgs", "brief_put_args"]

OPERATION: Final = "brief_put"


@final
@dataclass(frozen=True, slots=True)
class BriefPutArgs:
    """``brief_put``'s arguments once checked, the blob copied (D3)."""

    run_id: str
    owner: str
    ref: str
    data: bytes
    under: str
    # The least string above every one that starts with ``under``: the
    # prior-ref search is the key range [under, bound).
    bound: str
    tail: re.Pattern[str]
    meta_text: str | None


def brief_put_args(
    owner: object,
    ref: object,
    blob: object,
    under: object,
    tail: object,
    meta: object,
) -> BriefPutArgs:
    """Check ``brief_put``'s arguments (module docstring); nothing is read or written.

    Raises:
        InvalidArgumentError: a rule is broken.
    """
    ref, run_id = _intake.ref_for_write(ref, OPERATION)
    owner = _intake.owner_for_write(owner, OPERATION)
    _, under = last_ref_args(run_id, under, OPERATION)
    pattern = _tail_pattern(_intake.text_for_read(tail, OPERATION, "tail"))
    text = None
    if meta is not None:
        meta_run, text = _intake.meta_text(meta, OPERATION)
        if meta_run != run_id:
            raise InvalidArgumentError(
                f"{OPERATION}: meta names run {meta_run!r}, the ref's run is "
                f"{run_id!r}",
                OPERATION,
                "meta",
            )
    data = _intake.blob_bytes(blob, OPERATION)
    bound = prefix_upper_bound(under)
    assert bound is not None  # the prefix holds a '/', which can be raised
    return BriefPutArgs(run_id, owner, ref, data, under, bound, pattern, text)


def _tail_pattern(tail: str) -> re.Pattern[str]:
    try:
        return re.compile(tail)
    except re.error as exc:
        # The message names the fault's position, not the expression itself.
        raise InvalidArgumentError(
            f"{OPERATION}: tail is not a regular expression ({exc.msg} at "
            f"position {exc.pos})",
            OPERATION,
            "tail",
        ) from None
