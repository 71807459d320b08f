"""The spawned children of the file-machinery suite: each writes, then dies by SIGKILL.

Every child opens the location itself, reports through ``report`` (a pipe's
write end) and ends by ``SIGKILL``, from a failpoint hook or a timer, never by
returning: what the next open finds is what a crash leaves. A child whose store
never reaches its failpoint says so (``("survived",)``) and exits.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from rulvar_conformance.kill_points.child import sigkill_self
from rulvar_store import JournalEntry, RunMeta
from rulvar_store.backend import Failpoint, StoreLocation, set_failpoint_hook

__all__ = [
    "BLOB_REF",
    "RUN",
    "big_blob",
    "big_meta",
    "delete_dies_midway",
    "fill_entry",
    "renames_until_killed",
    "torn_append",
]

RUN: Final = "files-run"
BLOB_REF: Final = f"{RUN}/ckpt/1"
BLOB_BYTES: Final = 1 << 21
"""A 2 MiB blob: a write of it spans many syscalls' worth of time to land in."""
META_PAD_CHARS: Final = 1 << 18


def fill_entry(seq: int, pad: int = 0) -> JournalEntry:
    return {
        "kind": "step",
        "status": "ok",
        "scope": "",
        "key": f"files-{seq}",
        "seq": seq,
        "value": "x" * pad,
    }


def big_meta(version: int) -> RunMeta:
    """A meta large enough that writing it in place is visibly not instant."""
    return {
        "runId": RUN,
        "status": "running",
        "updatedAt": f"v{version}",
        "pad": str(version) * META_PAD_CHARS,
    }


def big_blob(version: int) -> bytes:
    return bytes([version % 256]) * BLOB_BYTES


def _kill_at(operation: str, point: Failpoint) -> None:
    """Install a hook that SIGKILLs this process when ``operation`` reaches ``point``."""

    def hook(reached: str, where: Failpoint) -> None:
        if reached == operation and where == point:
            sigkill_self()

    set_failpoint_hook(hook)


def torn_append(location: StoreLocation, complete: int, report: Any) -> None:
    """Append ``complete`` entries, then die halfway through the next one's line."""
    try:
        with location.open() as opened:
            for seq in range(1, complete + 1):
                opened.journal.append(RUN, fill_entry(seq))
            report.send(("armed",))
            _kill_at("append", "mid-write")
            opened.journal.append(RUN, fill_entry(complete + 1, pad=4096))
            report.send(("survived",))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        report.close()


def delete_dies_midway(location: StoreLocation, report: Any) -> None:
    """Write a meta, two entries and a blob, then die in the middle of the delete."""
    try:
        with location.open() as opened:
            opened.journal.put_meta(big_meta(1))
            opened.journal.append(RUN, fill_entry(1))
            opened.journal.append(RUN, fill_entry(2))
            opened.transcripts.put(BLOB_REF, b"kept")
            report.send(("armed",))
            _kill_at("delete", "mid-write")
            opened.journal.delete(RUN)
            report.send(("survived",))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        report.close()


def renames_until_killed(
    location: StoreLocation, kill_after_s: float, report: Any
) -> None:
    """Overwrite the meta and the blob with alternating versions until a timer kills us.

    Version 1 is written first and ``("ready",)`` sent; from then on versions 2
    and 1 alternate, each a whole meta and a whole blob, until the SIGKILL
    (``kill_after_s`` later) lands, most likely in the middle of a write.
    """
    try:
        with location.open() as opened:
            opened.journal.put_meta(big_meta(1))
            opened.transcripts.put(BLOB_REF, big_blob(1))
            report.send(("ready",))
            threading.Timer(kill_after_s, sigkill_self).start()
            version = 1
            while True:
                version = 3 - version
                opened.journal.put_meta(big_meta(version))
                opened.transcripts.put(BLOB_REF, big_blob(version))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        report.close()
