"""The second handle in another process: a lease taken in a spawned child holds here.

A store that keeps its lease table, lock or epoch counter in process memory
(a class-level dict, an in-process lock keyed by path) passes every check whose
handles share one interpreter. This check ships the location to a spawned child
(``multiprocess``, spawn context: dill pickles the opener, so a store author's
closure travels too), lets the child take the lease and write, and then
requires the parent's own handle to see the write, to find the run leased, and
to be able to continue the child's lease and follow it with a higher epoch.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.processes import _spawned
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import (
    blob_ref,
    entry,
    expect_refused,
    leasable,
)
from rulvar_store import Lease
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = ["across_processes"]

RUN: Final = "two-handles-process-run"
CHILD_TIMEOUT_S: Final = 120.0


def _child_takes_the_run(location: StoreLocation, blobs: bool, report: Any) -> None:
    """In the spawned child: acquire, append, put a blob; then live until killed.

    Sends ``("ok", owner, epoch)`` or ``("error", text)`` through ``report``.
    The child stays alive with its lease live: a store may take the lease of a
    holder whose process died over at once (L11), so only a living holder's
    lease must hold in the parent.
    """
    try:
        opened = location.open()
        lease = leasable(opened).acquire(RUN, "child-owner")
        opened.journal.append(RUN, entry(1, "child", 1), lease)
        if blobs:
            opened.transcripts.put(blob_ref(RUN), b"from the child", lease)
        report.send(("ok", lease.owner, lease.epoch))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    finally:
        report.close()
    while True:
        time.sleep(1)


def _child_report(message: Any, exitcode: int | None) -> tuple[str, int]:
    """The lease the child took; not run if it never reported."""
    if message is None:
        not_run(
            f"a spawned child process exited (code {exitcode}) without "
            "reporting; the calling program's main module must be importable and "
            "guard its entry point with if __name__ == '__main__'"
        )
    require(message[0] == "ok", f"the child's acquire and writes failed: {message[1]}")
    return str(message[1]), int(message[2])


def across_processes(locations: LocationFactory, caps: frozenset[str]) -> None:
    blobs = "fenced_transcripts" in caps
    with (
        at_fresh_location(locations, needs=("shared", "processes")) as site,
        _spawned(_child_takes_the_run, (site.location, blobs)) as (child, receive),
    ):
        parent = site.open()
        try:
            message = receive.recv() if receive.poll(CHILD_TIMEOUT_S) else None
        except EOFError:
            message = None  # the child died without a word
        try:
            owner, epoch = _child_report(message, child.exitcode)
            _parent_continues(parent, blobs, owner, epoch)
        finally:
            child.kill()


def _parent_continues(parent: Any, blobs: bool, owner: str, epoch: int) -> None:
    """The parent sees the child's writes, is refused its lease, then follows it."""
    keys = [item.get("key") for item in parent.journal.load(RUN)]
    require(
        keys == ["child-1"],
        f"expected the child's append visible through the parent's handle, "
        f"observed keys {keys}",
    )
    if blobs:
        seen = parent.transcripts.get(blob_ref(RUN))
        require(
            seen == b"from the child",
            f"expected the child's blob through the parent's handle, observed {seen!r}",
        )
    intruder = attempt(partial(leasable(parent).acquire, RUN, "parent-owner"))
    expect_refused(
        intruder,
        "the parent's acquire of a run a child process holds (the lease must "
        "live in the store, not in one process: L1)",
    )
    childs = Lease(RUN, owner, epoch)
    leasable(parent).renew(childs)  # any handle may continue a live lease
    leasable(parent).release(childs)
    after = leasable(parent).acquire(RUN, "parent-owner")
    require(
        after.epoch > epoch,
        f"expected the parent's acquire after the child's lease to get an epoch "
        f"above {epoch}, observed {after.epoch} (L3)",
    )
