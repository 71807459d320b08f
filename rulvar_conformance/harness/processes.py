"""Every child process the kit starts, started here.

Three ways, one per need:

- ``start_module``: a fresh interpreter running one of the kit's ``-m`` entry
  points (the kill-point worker, a soak writer, a boot-storm child). The child
  reads its task from the environment, its arguments or stdin, and may die by
  a signal the parent sends; ``finish`` waits for it under a deadline.
- ``ship_location`` / ``load_location``: a ``StoreLocation`` written to a file
  for such children (dill, so a store author's closure over a path travels),
  without its parent-side cleanup.
- ``run_spawned``: a Python callable in a spawned child (``multiprocess``, dill
  pickling) that answers through a pipe; ``None`` when it exited without
  answering (a main module that re-runs itself, a crash).

Keeping them in one module keeps one answer to "how does the kit start a
child": the same interpreter, the same ``sys.path``, the same dill shipping.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from rulvar_store.backend import StoreLocation

__all__ = [
    "DEVNULL",
    "PIPE",
    "Finished",
    "Spawned",
    "finish",
    "load_location",
    "run_spawned",
    "ship_location",
    "start_module",
]

DEVNULL: Final = subprocess.DEVNULL
PIPE: Final = subprocess.PIPE
STDERR_CHARS: Final = 2_000
"""How much of a child's stderr a report keeps (the tail: where it died)."""

Stream = int | IO[Any] | None


def start_module(
    module: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    exec_args: Sequence[str] = (),
    stdin: Stream = DEVNULL,
    stdout: Stream = DEVNULL,
    stderr: Stream = PIPE,
) -> subprocess.Popen[bytes]:
    """Start ``python [exec_args] -m module args`` with this interpreter.

    ``env`` adds variables to this process's environment (the child sees both).
    """
    return subprocess.Popen(
        [sys.executable, *exec_args, "-m", module, *args],
        env=None if env is None else {**os.environ, **env},
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
    )


@dataclass(frozen=True)
class Finished:
    """A child that is gone: exit code (negative: the signal), stderr tail, stdout."""

    returncode: int | None
    stderr: str
    timed_out: bool
    stdout: str = ""


def finish(
    child: subprocess.Popen[bytes], timeout_s: float, stdin: bytes | None = None
) -> Finished:
    """Feed ``stdin``, wait up to ``timeout_s``, SIGKILL a child still running."""
    timed_out = False
    try:
        out, err = child.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        child.kill()
        out, err = child.communicate()
    text = (err or b"").decode("utf-8", "replace")[-STDERR_CHARS:]
    return Finished(
        child.returncode, text, timed_out, (out or b"").decode("utf-8", "replace")
    )


def ship_location(location: StoreLocation, path: Path) -> None:
    """Write ``location`` for child processes (its cleanup stays with the parent).

    The file may hold a URL with a password: the caller removes it afterwards.
    """
    import dill  # paid for only by callers that start children

    with path.open("wb") as handle:
        dill.dump(dataclasses.replace(location, cleanup=None), handle, recurse=True)


def load_location(path: str | Path, sys_path: Sequence[str] = ()) -> StoreLocation:
    """Read a shipped location in the child; ``sys_path`` is the parent's path.

    The parent's path comes first so the opener's module (a store author's test
    file, say) imports as it did in the parent.
    """
    for entry in reversed(sys_path):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    import dill

    with open(path, "rb") as handle:
        location: StoreLocation = dill.load(handle)
    return location


@dataclass(frozen=True)
class Spawned:
    """What a spawned callable sent back (``None``: nothing), and its exit code."""

    message: Any
    exitcode: int | None


def run_spawned(
    target: Callable[..., None], args: tuple[Any, ...], timeout_s: float
) -> Spawned:
    """Run ``target(*args, send)`` in a spawned child; return the one message it sends.

    ``send`` is the write end of a pipe (``send.send(obj)``). A child still alive
    after the message (or ``timeout_s`` without one) is killed.
    """
    import multiprocess  # the spawn machinery is paid for only by its users

    context = multiprocess.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=target, args=(*args, send), daemon=True)
    child.start()
    send.close()
    message: Any = None
    try:
        if receive.poll(timeout_s):
            message = receive.recv()
    except EOFError:
        message = None
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(10)
        receive.close()
    return Spawned(message, child.exitcode)
