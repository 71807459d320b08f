"""Every child process the kit starts, started here.

Four ways, one per need:

- ``start_module``: a fresh interpreter running one of the kit's ``-m`` entry
  points (the kill-point worker, a soak writer, a boot-storm child). The child
  reads its task from the environment, its arguments or stdin, and may die by
  a signal the parent sends; ``finish`` waits for it under a deadline.
- ``ship_location`` / ``load_location``: a ``StoreLocation`` written to a file
  for such children (dill, so a store author's closure over a path travels),
  without its parent-side cleanup.
- ``run_spawned``: a Python callable in a spawned child (``multiprocess``, dill
  pickling) that answers through a pipe; ``None`` when it exited without
  answering (a main module that re-runs itself, a crash). ``stream_spawned``
  hands each of many messages on as it arrives, until the child dies.

- ``run_tool``: a system tool run to its end with its output captured (the
  fault soaks' ``ip``, ``tc``, ``ss``, ``initdb`` and ``pg_ctl``).

Keeping them in one module keeps one answer to "how does the kit start a
child": the same interpreter, the same ``sys.path``, the same dill shipping.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
    "run_tool",
    "ship_location",
    "start_module",
    "stream_spawned",
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
    host: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``python [exec_args] -m module args`` with this interpreter.

    ``env`` adds variables to this process's environment (the child sees both).
    ``host``: an argv prefix that runs the child elsewhere, such as a fault
    soak's writer host (``ip netns exec NAME``, which execs in place: same pid).
    """
    return subprocess.Popen(
        [*host, sys.executable, *exec_args, "-m", module, *args],
        env=None if env is None else {**os.environ, **env},
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
    )


def start_program(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: Stream = DEVNULL,
    stderr: Stream = PIPE,
    cwd: str | None = None,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start a program that is no Python module of ours (a cluster's etcd, Patroni).

    ``env`` replaces this process's environment when given; ``new_session`` puts
    the child in a session of its own (signals to this process's group miss it).
    """
    return subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        stdin=DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        start_new_session=new_session,
    )


def run_tool(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end (text output captured, no check of the exit code).

    Raises:
        subprocess.TimeoutExpired: it ran past ``timeout_s`` (it is killed).
    """
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
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


@contextmanager
def _spawned(
    target: Callable[..., None], args: tuple[Any, ...]
) -> Iterator[tuple[Any, Any]]:
    """Start ``target(*args, send)`` in a spawned child; yield ``(child, receive)``.

    Afterwards the child is given 10 s to end, then killed, and the pipe closed.
    """
    import multiprocess  # the spawn machinery is paid for only by its users

    context = multiprocess.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=target, args=(*args, send), daemon=True)
    child.start()
    send.close()
    try:
        yield child, receive
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(10)
        receive.close()


def run_spawned(
    target: Callable[..., None], args: tuple[Any, ...], timeout_s: float
) -> Spawned:
    """Run ``target(*args, send)`` in a spawned child; return the one message it sends.

    ``send`` is the write end of a pipe (``send.send(obj)``). A child still alive
    after the message (or ``timeout_s`` without one) is killed.
    """
    message: Any = None
    with _spawned(target, args) as (child, receive):
        try:
            if receive.poll(timeout_s):
                message = receive.recv()
        except EOFError:
            message = None
    return Spawned(message, child.exitcode)


def stream_spawned(
    target: Callable[..., None],
    args: tuple[Any, ...],
    timeout_s: float,
    on_message: Callable[[Any], bool],
) -> int | None:
    """Run ``target(*args, send)`` in a spawned child; pass on each message it sends.

    ``on_message`` returns False to stop listening. Messages are read until the
    child's end of the pipe closes (it exited or was killed: everything it sent
    has arrived), ``on_message`` says stop, or ``timeout_s`` passes; a child
    still alive then is killed. Returns the child's exit code (``-9``: SIGKILL).
    """
    deadline = time.monotonic() + timeout_s
    with _spawned(target, args) as (child, receive):
        try:
            while receive.poll(max(0.0, deadline - time.monotonic())):
                if not on_message(receive.recv()):
                    break
        except EOFError:
            pass  # the child is gone and its pipe drained
    exitcode: int | None = child.exitcode
    return exitcode
