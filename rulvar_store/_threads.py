"""How a LangGraph thread shows as a run, readable without LangGraph installed.

``rulvar_langgraph`` stores each thread as one run (its checkpoints are blobs of
the run) and writes the run's meta; ``rulvar runs`` reads them back. Both sides
use this module, so the operator commands work on a core install:

- the run id of a thread (``run_for_thread``) and back (``thread_for_run``): a
  thread id that is not a safe token (``"user/42 ticket"``) is stored as
  ``lgx.`` plus its UTF-8 hex;
- the meta fields the saver writes: ``threadId``, and where a hold ended,
  ``threadStatus`` (``finished``, ``interrupted``, ``failed``) with the newest
  root checkpoint it describes (``checkpointId``);
- the status shown (``thread_view``), derived when read from three facts: the
  lease row (live: ``running``; expired and never released: ``abandoned``, the
  holder died or stopped renewing), the outcome the last hold wrote, and the
  newest root checkpoint (newer than that outcome: ``incomplete``, written
  without a hold ending since). ``updatedAt`` is the newest root checkpoint's
  time (its uuid6 id) when that is later than the meta's, so it moves with
  every checkpoint without a meta write per checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeGuard

from rulvar_store._observe import LeaseState
from rulvar_store._refs import is_safe_token
from rulvar_store.errors import InvalidArgumentError

__all__ = [
    "THREAD_NAME",
    "THREAD_STATUSES",
    "THREAD_TAG",
    "ThreadView",
    "checkpoint_time",
    "is_thread_meta",
    "iso_ms",
    "root_checkpoint_prefix",
    "run_for_thread",
    "split_checkpoint_ref",
    "thread_for_run",
    "thread_view",
]

THREAD_NAME: Final = "langgraph"
THREAD_TAG: Final = "langgraph"
THREAD_STATUSES: Final = (
    "running",
    "interrupted",
    "finished",
    "failed",
    "abandoned",
    "incomplete",
)
"""Every status ``thread_view`` gives; the first five are the issue's, the last
means checkpoints were written after the last hold's outcome by no hold (an
unheld invocation, or a thread written only outside holds)."""

OUTCOMES: Final = {"finished": "ok", "failed": "error", "interrupted": "suspended"}
"""A hold's outcome and the run status (TS ``RunStatus``) its meta carries."""

# Thread ids that are not safe tokens (or that look encoded) become this prefix
# plus their UTF-8 hex, so the mapping stays reversible and collision-free.
_ENCODED: Final = "lgx."
# 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_OFFSET: Final = 0x01B21DD213814000


def run_for_thread(thread_id: object) -> str:
    """Return the run id that stores ``thread_id``.

    Raises:
        InvalidArgumentError: the thread id is not a non-empty string, or is too
            long to map onto a run id.
    """
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgumentError(
            f"LangGraph thread_id must be a non-empty string, got {thread_id!r}",
            "checkpoint",
            "thread_id",
        )
    if is_safe_token(thread_id) and not thread_id.startswith(_ENCODED):
        return thread_id
    run_id = _ENCODED + thread_id.encode().hex()
    if not is_safe_token(run_id):
        raise InvalidArgumentError(
            f"LangGraph thread_id {thread_id[:60]!r} is too long to store as a run id",
            "checkpoint",
            "thread_id",
        )
    return run_id


def thread_for_run(run_id: str) -> str:
    """Invert ``run_for_thread``."""
    if run_id.startswith(_ENCODED):
        return bytes.fromhex(run_id[len(_ENCODED) :]).decode()
    return run_id


def root_checkpoint_prefix(run_id: str) -> str:
    """What every checkpoint ref of the thread's root namespace starts with."""
    return f"{run_id}/c/n/"


def split_checkpoint_ref(ref: str) -> str | None:
    """The checkpoint id of a root checkpoint's own blob ref, else ``None``.

    ``<run>/c/n/<cid>/z`` (this version) or ``<run>/c/n/<cid>`` (earlier ones);
    a task's writes ``<run>/c/n/<cid>/w/...`` are not a checkpoint.
    """
    parts = ref.split("/")
    if len(parts) < 4 or parts[1:3] != ["c", "n"]:
        return None
    if len(parts) == 4 or (len(parts) == 5 and parts[4] == "z"):
        return parts[3]
    return None


def is_thread_meta(meta: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a meta record is a LangGraph thread's (tagged, with its thread id)."""
    return (
        isinstance(meta, dict)
        and isinstance(meta.get("threadId"), str)
        and isinstance(meta.get("tags"), list)
        and THREAD_TAG in meta["tags"]
    )


def checkpoint_time(checkpoint_id: str) -> datetime | None:
    """When LangGraph made a checkpoint id (a uuid6 carries its time), else ``None``."""
    digits = checkpoint_id.replace("-", "")
    if len(digits) != 32 or digits[12] != "6":
        return None
    try:
        value = int(digits, 16)
    except ValueError:
        return None
    ticks = ((value >> 80) << 12) | ((value >> 64) & 0x0FFF)
    ns = (ticks - _UUID_EPOCH_OFFSET) * 100
    if ns <= 0:
        return None
    try:
        return datetime.fromtimestamp(ns / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def iso_ms(moment: datetime) -> str:
    """``2026-01-02T03:04:05.678Z``: JavaScript's ``toISOString`` form."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _parsed(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ThreadView:
    """One thread as ``rulvar runs`` shows it."""

    thread_id: str
    status: str
    reason: str
    updated_at: str | None
    checkpoint_id: str | None
    holder: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "threadId": self.thread_id,
            "status": self.status,
            "reason": self.reason,
            "updatedAt": self.updated_at,
            "checkpointId": self.checkpoint_id,
            "holder": self.holder,
        }


def thread_view(
    meta: dict[str, Any],
    lease: LeaseState | None,
    newest_checkpoint_id: str | None,
) -> ThreadView:
    """The status and times of a thread from its meta, lease row and newest root checkpoint.

    ``lease`` is ``None`` when the run has no lease row (never leased, or
    released: every hold and brief lease releases). ``newest_checkpoint_id`` is
    the greatest checkpoint id of the root namespace, ``None`` if it has none.
    """
    thread_id = str(meta["threadId"])
    outcome = meta.get("threadStatus")
    described = meta.get("checkpointId")
    moments = [
        m
        for m in (
            _parsed(meta.get("updatedAt")),
            None
            if newest_checkpoint_id is None
            else checkpoint_time(newest_checkpoint_id),
        )
        if m is not None
    ]
    updated = iso_ms(max(moments)) if moments else None
    holder: str | None = None
    if lease is not None and lease.live:
        status, holder = "running", lease.owner
        reason = f"held by {lease.owner!r} (epoch {lease.epoch})"
    elif lease is not None:
        status, holder = "abandoned", lease.owner
        reason = (
            f"the lease of {lease.owner!r} (epoch {lease.epoch}) expired without a "
            "release: its worker died or stopped renewing"
        )
    elif outcome in OUTCOMES and (
        newest_checkpoint_id is None
        or not isinstance(described, str)
        or described >= newest_checkpoint_id
    ):
        status = str(outcome)
        reason = f"the last hold ended {outcome}"
    else:
        status = "incomplete"
        reason = (
            "checkpoints were written after the last hold's outcome, outside a hold"
            if outcome in OUTCOMES
            else "no hold of this thread has ended (written outside holds, or by an "
            "earlier version)"
        )
    return ThreadView(thread_id, status, reason, updated, newest_checkpoint_id, holder)
