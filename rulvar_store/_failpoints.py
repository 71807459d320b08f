"""Named failpoints inside store transactions, for kill-point and fault tests.

Backends call ``hit(operation, point)`` at fixed points of their one transaction
path: ``after-begin``, ``after-fence-check``, ``before-commit``, ``after-commit``.
With no hook installed a hit costs one global read. A test or the kill-point
driver installs a hook (for example one that SIGKILLs the process when a given
operation reaches a given point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

__all__ = ["FAILPOINTS", "Failpoint", "FailpointHook", "hit", "set_failpoint_hook"]

Failpoint = Literal["after-begin", "after-fence-check", "before-commit", "after-commit"]
FAILPOINTS: Final[tuple[Failpoint, ...]] = (
    "after-begin",
    "after-fence-check",
    "before-commit",
    "after-commit",
)

FailpointHook = Callable[[str, Failpoint], None]

_hook: FailpointHook | None = None


def set_failpoint_hook(hook: FailpointHook | None) -> FailpointHook | None:
    """Install ``hook`` for every store in this process; return the previous one."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def hit(operation: str, point: Failpoint) -> None:
    """Run the installed hook, if any, for ``operation`` reaching ``point``."""
    hook = _hook
    if hook is not None:
        hook(operation, point)
