"""What a hold saw of its root namespace, and the outcome it writes when it ends.

The hold's own writes tell how the invocation ended, at no store cost: the
newest root checkpoint it put, whether LangGraph stored interrupt or error
writes against that checkpoint, and whether that checkpoint still has tasks
to run (its ``updated_channels`` name a node's trigger: a static breakpoint
or a drain stopped the graph). ``HoldNotes.outcome`` turns that, and whether
the hold's body raised, into the meta fields ``_plans.ended`` writes: ONE meta
read and write per hold that wrote, instead of one per checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from rulvar_store.ops import THREAD_OUTCOMES as OUTCOMES

__all__ = ["HoldNotes"]

INTERRUPT: Final = "__interrupt__"
ERROR: Final = "__error__"
# Channels whose update schedules a task in the next step (StateGraph's edges
# write "branch:to:<node>", the input "__start__", Send "__pregel_tasks").
_TRIGGERS: Final = ("__start__", "__pregel_tasks")
_BRANCH: Final = "branch:to:"


@dataclass(slots=True)
class HoldNotes:
    """One hold's view of its root namespace (``checkpoint_ns == ""``)."""

    checkpoint_id: str | None = None
    pending: bool = False
    interrupted: bool = False
    errored: bool = False

    def _at(self, checkpoint_id: str) -> bool:
        """Follow ``checkpoint_id`` if it is the newest seen; whether it is the one followed."""
        if self.checkpoint_id is None or checkpoint_id > self.checkpoint_id:
            self.checkpoint_id = checkpoint_id
            self.pending = self.interrupted = self.errored = False
        return checkpoint_id == self.checkpoint_id

    def put(self, checkpoint_id: str, checkpoint: dict[str, Any]) -> None:
        """The hold stored a root checkpoint."""
        if self._at(checkpoint_id):
            updated = checkpoint.get("updated_channels") or ()
            self.pending = any(
                isinstance(name, str)
                and (name in _TRIGGERS or name.startswith(_BRANCH))
                for name in updated
            )

    def writes(self, checkpoint_id: str, channels: Iterable[str]) -> None:
        """The hold stored a task's writes against a root checkpoint."""
        if self._at(checkpoint_id):
            for channel in channels:
                self.interrupted |= channel == INTERRUPT
                self.errored |= channel == ERROR

    def outcome(self, raised: BaseException | None) -> dict[str, Any] | None:
        """The meta fields the hold's end writes; ``None``: it wrote nothing at the root."""
        if self.checkpoint_id is None:
            return None
        fields: dict[str, Any] = {"checkpointId": self.checkpoint_id}
        if raised is not None or self.errored:
            status = "failed"
            if raised is not None:
                fields["error"] = type(raised).__name__
        elif self.interrupted or self.pending:
            status = "interrupted"
        else:
            status = "finished"
        fields["threadStatus"] = status
        fields["status"] = OUTCOMES[status]
        return fields
