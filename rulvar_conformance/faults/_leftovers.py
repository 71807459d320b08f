"""What a fault soak killed with SIGKILL left behind, removed by the next soak.

A soak that dies before its cleanup runs leaves kernel objects (network
namespaces, a bridge, veths) and a private postmaster serving a temporary
folder; nothing else would ever remove them. So each such resource is claimed
with an owner record (pid and the process's start time, so a reused pid is not
taken for the owner), and whoever makes a new one first removes those whose
owner is gone. A resource whose owner still runs (another soak) is left alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

__all__ = ["OwnerRecord", "claim", "owner_alive", "records_dir", "release", "sweep"]

OwnerRecord = dict[str, Any]


def records_dir() -> Path:
    """Where the owner records live (``$RULVAR_FAULTS_RECORDS`` or the temp folder)."""
    configured = os.environ.get("RULVAR_FAULTS_RECORDS")
    folder = (
        Path(configured)
        if configured
        else Path(tempfile.gettempdir()) / "rulvar-faults"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # Field 22 (starttime); the command name (field 2) may hold spaces and
    # parentheses, so count from the last ')'.
    after_name = stat.rsplit(")", 1)[-1].split()
    state, started = after_name[0], after_name[19]
    return None if state in ("Z", "X") else int(started)


def owner_alive(record: OwnerRecord) -> bool:
    """True while the process that claimed ``record`` still runs."""
    pid, started = record.get("pid"), record.get("started")
    if not isinstance(pid, int) or not isinstance(started, int):
        return False
    return _start_time(pid) == started


def claim(kind: str, tag: str, **detail: object) -> Path:
    """Record that this process owns resource ``tag`` of ``kind``; returns the record's path."""
    pid = os.getpid()
    started = _start_time(pid)
    path = records_dir() / f"{kind}-{tag}.json"
    record = {"kind": kind, "tag": tag, "pid": pid, "started": started, **detail}
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(record))
    partial.replace(path)  # a reader never sees half a record
    return path


def release(path: Path) -> None:
    """The resource is gone (its owner removed it): drop the record."""
    path.unlink(missing_ok=True)


def sweep(kind: str, remove: Callable[[OwnerRecord], None]) -> list[str]:
    """Remove every ``kind`` resource whose owner is gone; returns their tags.

    ``remove`` must be idempotent: a record whose removal raised stays, and the
    next sweep tries again.
    """
    removed: list[str] = []
    for path in sorted(records_dir().glob(f"{kind}-*.json")):
        try:
            record: OwnerRecord = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue  # released meanwhile, or not ours to judge
        if not isinstance(record, dict) or owner_alive(record):
            continue
        # Whatever removal raises (a busy device, a vanished folder), the record
        # stays for the next sweep, and this soak goes on with its own resources.
        with suppress(Exception):
            remove(record)
            release(path)
            removed.append(str(record.get("tag")))
    return removed
