"""Is a lease holder's process provably dead? One host's answer (L11).

A store that records who took a lease (the holder's *process identity*) lets a
successor take a live lease over at once when that process is gone, instead of
waiting out the ttl. The identity is ``boot id / pid namespace / pid / start
time``: the boot id tells this boot of this host from another host or an earlier
boot sharing the file, the pid namespace tells containers apart, and the start
time (clock ticks since boot, from ``/proc/<pid>/stat``) tells the holder from a
later process that reused its pid.

The verdict is ``dead`` only when this host can prove it: same boot, same pid
namespace, and no process with that pid, or one that started at another time,
or a zombie (it has exited). Anything it cannot read or compare is *unknown*,
which callers treat as alive. A stopped (SIGSTOP) process is alive. Safety never
rests on the verdict: the fence still refuses every write of a holder judged
wrongly, this only decides whether a successor waits.
"""

from __future__ import annotations

import functools
import os
from typing import Final

__all__ = ["holder_is_dead", "this_process"]

_SEP: Final = "/"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _boot_id() -> str | None:
    return _read("/proc/sys/kernel/random/boot_id")


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of ``pid`` from /proc, or None when it has no entry."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # state (field 3), starttime (field 22)


@functools.cache
def _identity_of(pid: int) -> str | None:
    boot, namespace, stat = _boot_id(), _pid_namespace(), _stat(pid)
    if boot is None or namespace is None or stat is None:
        return None
    return _SEP.join((boot, namespace, str(pid), stat[1]))


def this_process() -> str | None:
    """This process's identity, or None where /proc cannot tell it (not Linux)."""
    return _identity_of(os.getpid())


def holder_is_dead(identity: object) -> bool:
    """True only when the process ``identity`` names provably no longer runs."""
    if not isinstance(identity, str):
        return False
    parts = identity.split(_SEP)
    if len(parts) != 4 or not parts[2].isdigit():
        return False
    boot, namespace, pid_text, started = parts
    if boot != _boot_id() or namespace != _pid_namespace():
        return False  # another host, boot or container: cannot tell
    pid = int(pid_text)
    if pid == os.getpid():
        return this_process() != identity
    if not os.path.isdir("/proc/self"):
        return False  # no /proc at all: cannot tell
    stat = _stat(pid)
    if stat is None:
        # No entry: gone, unless /proc hides other processes (hidepid).
        return not _pid_exists(pid)
    state, start = stat
    return start != started or state in ("Z", "X")


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists, owned by someone else
    return True
