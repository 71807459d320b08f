"""The boot storm (S11): many processes construct the store over ONE fresh location at once.

Each child imports everything and unpickles the location first, then waits for a
shared start signal, so the constructions really collide (SQLite's journal-mode
switch and DDL, PostgreSQL's lazy schema bootstrap). Every child opens a handle,
makes one read (``get_meta('boot-probe')``, which forces a lazy boot), closes and
must exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.processes import (
    PIPE,
    finish,
    load_location,
    ship_location,
    start_module,
)
from rulvar_store import ConfigError
from rulvar_store.backend import LocationFactory

__all__ = ["BootStormResult", "run_boot_storm"]

START_WAIT_S: Final = 30.0


@dataclass
class BootStormResult:
    """Per round: wall ms from the start signal to the last exit; any failures."""

    round_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def run_boot_storm(
    locations: LocationFactory,
    *,
    processes: int = 8,
    rounds: int = 2,
    ttl_ms: int = 250,
    timeout_s: float = 60.0,
) -> BootStormResult:
    """Boot ``processes`` children at once over a fresh location, ``rounds`` times.

    Raises:
        ConfigError: the location cannot be opened in a child process.
    """
    result = BootStormResult()
    deadline = time.monotonic() + timeout_s
    for number in range(rounds):
        location = locations()
        try:
            if not location.processes:
                raise ConfigError(
                    f"location {location.name!r} cannot be opened in a child process"
                )
            with tempfile.TemporaryDirectory(prefix="rulvar-boot-") as scratch:
                folder = Path(scratch)
                pickled = folder / "location.dill"
                ship_location(location, pickled)
                go = folder / "go"
                children = [
                    start_module(
                        "rulvar_conformance.soak.boot_storm",
                        str(pickled),
                        str(go),
                        str(ttl_ms),
                        os.pathsep.join(p for p in sys.path if p),
                        stdout=PIPE,
                    )
                    for _ in range(processes)
                ]
                _wait_ready(children, folder, processes, deadline)
                started = time.monotonic()
                go.touch()
                for index, child in enumerate(children):
                    done = finish(child, max(0.1, deadline - time.monotonic()))
                    if done.timed_out:
                        result.failures.append(
                            f"round {number + 1} child {index}: no exit within {timeout_s:g} s"
                        )
                    elif done.returncode != 0:
                        result.failures.append(
                            f"round {number + 1} child {index}: exit {done.returncode}: "
                            f"{done.stderr.strip()}"
                        )
                result.round_ms.append((time.monotonic() - started) * 1000.0)
        finally:
            location.remove()
    return result


def _wait_ready(
    children: list[subprocess.Popen[bytes]],
    folder: Path,
    processes: int,
    deadline: float,
) -> None:
    """Wait until every child has imported and unpickled (or died); bounded."""
    limit = min(deadline, time.monotonic() + START_WAIT_S)
    while time.monotonic() < limit:
        ready = len(list(folder.glob("ready-*")))
        if ready + sum(child.poll() is not None for child in children) >= processes:
            return
        time.sleep(0.01)


def _child(pickled: str, go: str, ttl_ms: int, path: str) -> int:
    location = load_location(pickled, path.split(os.pathsep))
    Path(go).with_name(f"ready-{os.getpid()}").touch()
    while not os.path.exists(go):
        time.sleep(0.001)
    opened: Any = location.open(ttl_ms)
    try:
        getter = getattr(opened.journal, "get_meta", None)
        if getter is not None:
            getter("boot-probe")
        else:
            opened.journal.load("boot-probe")
    finally:
        opened.close()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
