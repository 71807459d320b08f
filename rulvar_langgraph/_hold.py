"""Holding a thread: its lease kept alive, and its loss told to the running work (L10).

A hold's lease is kept by a ``LeaseKeeper`` (sync saver) or an
``AsyncLeaseKeeper`` (asyncio saver), carried in the hold's config under
``HOLD_KEY``. Once the lease is lost (a renewal refused, or none succeeded
before its expiry) every write of the hold raises ``LeaseLostError`` before
touching the store, ``ensure_owned(config)`` raises it in nodes and tools, and
an asyncio hold cancels the task running the invocation (``CancelOnLoss``),
which its ``hold`` turns into ``LeaseLostError``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from rulvar_langgraph._core import HOLD_KEY
from rulvar_store import (
    AsyncLeaseKeeper,
    InvalidArgumentError,
    LeaseKeeper,
    LeaseLostError,
)

__all__ = ["LOST_MESSAGE", "CancelOnLoss", "ensure_owned", "owned"]

LOST_MESSAGE: Final = "rulvar: the hold's lease was lost"


def _keeper(config: Any) -> LeaseKeeper | AsyncLeaseKeeper:
    configurable = config.get("configurable") if isinstance(config, dict) else None
    keeper = (configurable or {}).get(HOLD_KEY)
    if not isinstance(keeper, LeaseKeeper | AsyncLeaseKeeper):
        raise InvalidArgumentError(
            "this config carries no rulvar hold: pass the config your node "
            "received, from an invocation made with saver.hold(thread_id)",
            "ensure_owned",
            "config",
        )
    return keeper


def ensure_owned(config: Any) -> None:
    """Raise unless the hold that made ``config`` still owns its thread.

    Call it in a node or tool, with the config LangGraph passed it, right before
    a side effect (a payment, an email): a worker that lost its thread (paused
    past the ttl, cut off from the store) stops there instead of acting twice.

    Raises:
        LeaseLostError: the hold's lease is lost; let it propagate.
        InvalidArgumentError: the config comes from no hold.
    """
    _keeper(config).ensure_owned()


def owned(config: Any) -> bool:
    """Whether the hold that made ``config`` still owns its thread.

    Raises:
        InvalidArgumentError: the config comes from no hold.
    """
    return _keeper(config).owned


class CancelOnLoss:
    """Cancels the task that entered an asyncio hold when its lease is lost.

    ``translate`` turns the cancellation this caused back into the typed
    ``LeaseLostError`` at the hold's exit; a cancellation from elsewhere stays one.
    """

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        self.fired = False

    def __call__(self, error: LeaseLostError) -> None:
        task = self._task
        if task is not None and not task.done():
            self.fired = True
            task.cancel(LOST_MESSAGE)

    def translate(self, lost: LeaseLostError | None) -> LeaseLostError | None:
        """The error to raise instead of the current ``CancelledError``, if ours."""
        task = self._task
        if not self.fired or lost is None or task is None:
            return None
        self.fired = False
        if task.uncancel() > 0:
            return None  # someone else cancelled the task too: that one wins
        return lost
