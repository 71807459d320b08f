"""The soak's history records: one JSON line per event, flushed before the next call.

Every writer process appends to its own JSONL file with one unbuffered ``write``
per line, so a SIGKILL loses at most the line being written (a torn last line is
tolerated by ``read_events``). Each record carries the writer index ``w``, its
incarnation ``inc`` (a respawned writer gets a new one) and ``ns``, the
system-wide ``CLOCK_MONOTONIC`` in nanoseconds, which orders records of different
processes on one host.

A store call is an ``invoke`` record (written before the call) plus exactly one
completion record naming the same ``id`` (written after it). An ``invoke`` with no
completion, or completed by ``unknown``, has an unknown outcome: the referee
resolves it from the store's final state.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

__all__ = [
    "COMPLETIONS",
    "Event",
    "EventSink",
    "FileSink",
    "ListSink",
    "monotonic_ns",
    "read_events",
    "unfinished_ids",
]

Event = dict[str, Any]

COMPLETIONS: Final = frozenset(
    {
        "accept",
        "stale-reject",
        "stale-accept",
        "fence-kick",
        "live-cross-reject",
        "grant",
        "held",
        "released",
        "step",
        "step-failed",
        "unknown",
        "error",
    }
)
"""Record types that complete an ``invoke`` when they carry its ``id``."""


def monotonic_ns() -> int:
    """The host-wide monotonic clock (Linux ``CLOCK_MONOTONIC``), in nanoseconds."""
    return time.monotonic_ns()


EventSink = Callable[[Event], None]
"""Receives each record as soon as it is made."""


class FileSink:
    """Appends each record as one line with one unbuffered ``write`` call."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, event: Event) -> None:
        line = json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"
        os.write(self._fd, line.encode("utf-8"))

    def close(self) -> None:
        os.close(self._fd)


class ListSink:
    """Keeps records in memory (in-process self-tests)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)


def read_events(
    path: str | os.PathLike[str], start: int = 0
) -> tuple[list[Event], int]:
    """Parse complete lines of ``path`` from byte ``start``; return them and the next offset.

    A last line without its newline (a writer killed mid-write, or one still
    writing) is left for the next read; a complete line that is not JSON is kept
    as a ``{"t": "torn"}`` record so nothing disappears silently.
    """
    try:
        with Path(path).open("rb") as handle:
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return [], start
    end = data.rfind(b"\n") + 1
    events: list[Event] = []
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            events.append(json.loads(raw))
        except ValueError:
            events.append({"t": "torn", "text": raw[:200].decode("utf-8", "replace")})
    return events, start + end


def unfinished_ids(events: Iterable[Event]) -> dict[str, Event]:
    """Invokes with no completion (or completed ``unknown``): outcome unknown."""
    open_calls: dict[str, Event] = {}
    for event in events:
        if event.get("t") == "invoke":
            open_calls[event["id"]] = event
        elif event.get("t") in COMPLETIONS and event.get("t") != "unknown":
            open_calls.pop(event.get("id", ""), None)
    return open_calls
