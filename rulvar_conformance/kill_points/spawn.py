"""Starting kill-point children: one real process per case, optionally started ahead.

A child is ``python -m rulvar_conformance.kill_points.worker``. ``spawn_worker``
starts it with the config in ``RULVAR_KILL_POINT_CONFIG`` (K5). ``WarmWorkers``
keeps the NEXT child started ahead, waiting for its config on stdin, so the
interpreter start and the imports of one case overlap the previous case. The
warm child has opened nothing yet: it opens the location only once it reads its
config, exactly like a cold one, and it dies by the same SIGKILL.
"""

from __future__ import annotations

import subprocess
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from rulvar_conformance.harness.processes import PIPE, finish, start_module
from rulvar_conformance.kill_points.child import (
    CONFIG_ENV,
    CONFIG_ON_STDIN,
    KillPointWorkerConfig,
    read_report,
)

__all__ = ["CHILD_TIMEOUT_S", "ChildRun", "WarmWorkers", "spawn_worker"]

CHILD_TIMEOUT_S: Final = 30.0
WORKER_MODULE: Final = "rulvar_conformance.kill_points.worker"


@dataclass(frozen=True)
class ChildRun:
    """A finished child: exit code, report events, the tail of stderr."""

    returncode: int | None
    events: list[dict[str, Any]]
    stderr: str
    timed_out: bool


def _finish(
    child: subprocess.Popen[bytes],
    config: KillPointWorkerConfig,
    stdin: bytes | None,
    timeout_s: float,
) -> ChildRun:
    done = finish(child, timeout_s, stdin)
    events = read_report(config.report_path)
    return ChildRun(done.returncode, events, done.stderr, done.timed_out)


def spawn_worker(
    config: KillPointWorkerConfig,
    *,
    exec_args: Sequence[str] = (),
    timeout_s: float = CHILD_TIMEOUT_S,
) -> ChildRun:
    """Run the worker with ``config`` in a new child; kill it after ``timeout_s``."""
    child = start_module(
        WORKER_MODULE, env={CONFIG_ENV: config.to_env()}, exec_args=exec_args
    )
    return _finish(child, config, None, timeout_s)


def _dismiss(waiting: list[subprocess.Popen[bytes]]) -> None:
    """End children still waiting for a config: EOF on stdin makes them exit."""
    while waiting:
        finish(waiting.pop(), 10, b"")


class WarmWorkers:
    """Runs each config in a child that was started while the previous case ran.

    Close it (or let it be collected) to end the child still waiting.
    """

    def __init__(self, exec_args: Sequence[str] = ()) -> None:
        self._exec_args = tuple(exec_args)
        self._lock = threading.Lock()
        self._waiting: list[subprocess.Popen[bytes]] = []
        self._finalizer = weakref.finalize(self, _dismiss, self._waiting)

    def _start(self) -> subprocess.Popen[bytes]:
        return start_module(
            WORKER_MODULE, CONFIG_ON_STDIN, exec_args=self._exec_args, stdin=PIPE
        )

    def run(
        self, config: KillPointWorkerConfig, *, timeout_s: float = CHILD_TIMEOUT_S
    ) -> ChildRun:
        """Hand ``config`` to a waiting child (or a new one) and wait for its end."""
        with self._lock:
            child = self._waiting.pop() if self._waiting else self._start()
            self._waiting.append(self._start())
        return _finish(child, config, config.to_env().encode("utf-8"), timeout_s)

    def close(self) -> None:
        """End the child waiting for the next case."""
        self._finalizer()
