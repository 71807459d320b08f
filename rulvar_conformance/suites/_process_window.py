"""Write windows held open in one place, raced from another: a process, a location.

``x3-window-across-processes`` (X12): a spawned child acquires a run and
appends, and its append pauses at ``after-fence-check`` (the fence passed, the
mutation not committed) until the parent lets it go. While it stands there the
parent releases the child's lease through a handle of its own. An honest store
holds whatever excludes writers (SQLite's write lock, the run's advisory lock)
in the store itself, so the release waits or raises ``StoreBusyError``. A store
whose exclusion lives in one process (a threading lock over a deferred BEGIN)
or whose lock key is computed from per-process state (Python's randomized
``hash()``) lets the release commit inside the window: two processes' handles
of one run do not exclude each other.

``x11-locations-independent`` (X11): a writer at one location is paused inside
its window; a handle at a second, fresh location acquires and appends to the
same run id. Locations share nothing, so that succeeds at once. A lock key that
leaves out the location (PostgreSQL: the schema) makes it wait for a stranger.

Both need failpoints (without them: not run, with the reason).
"""

from __future__ import annotations

import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.failpause import (
    PAUSE_LIMIT_S,
    Background,
    FailpointPause,
    installed,
)
from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.processes import stream_spawned
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import entry, leasable
from rulvar_conformance.suites._windows import (
    Competitor,
    dry_hits,
    refused_or_waiting,
)
from rulvar_store import Lease
from rulvar_store.backend import (
    Failpoint,
    LocationFactory,
    StoreLocation,
    set_failpoint_hook,
)

__all__ = ["locations_independent", "window_across_processes"]

RUN: Final = "x3-process-window"
CHILD_TIMEOUT_S: Final = 120.0
WINDOW_POINT: Final = "after-fence-check"
ELSEWHERE_PATIENCE_S: Final = 10.0
"""How long a write at another location may take while the first holds a window
(an independent location answers in milliseconds)."""


def _child_holds_window(location: StoreLocation, go: str, report: Any) -> None:
    """In the spawned child: acquire, then append paused at its fence-to-commit window.

    Sends ``("lease", owner, epoch)``, ``("reached",)`` once the append stands at
    ``after-fence-check`` (it then waits for the file ``go`` to exist), and
    finally ``("done", error text or None)``; ``("error", text)`` if the setup
    failed.
    """
    try:
        with location.open() as opened:
            lease = leasable(opened).acquire(RUN, "child-owner")
            report.send(("lease", lease.owner, lease.epoch))

            paused: list[bool] = []

            def hook(operation: str, point: Failpoint) -> None:
                # Once: a store that retries a busy write passes here again.
                if operation == "append" and point == WINDOW_POINT and not paused:
                    paused.append(True)
                    report.send(("reached",))
                    deadline = time.monotonic() + PAUSE_LIMIT_S
                    while not Path(go).exists() and time.monotonic() < deadline:
                        time.sleep(0.01)

            set_failpoint_hook(hook)
            outcome = attempt(
                partial(opened.journal.append, RUN, entry(1, "child", 1), lease)
            )
            set_failpoint_hook(None)
            error = outcome.error
            report.send(("done", None if error is None else repr(error)))
    except Exception as exc:
        report.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        report.close()


def window_across_processes(locations: LocationFactory, caps: frozenset[str]) -> None:
    with (
        at_fresh_location(locations, needs=("shared", "processes")) as site,
        tempfile.TemporaryDirectory(prefix="rulvar-window-") as scratch,
    ):
        fail_fast = site.location.contention
        parent = site.open(fail_fast=fail_fast)
        go = Path(scratch) / "go"
        seen: dict[str, Any] = {}
        competitor: list[Competitor[None]] = []

        def on_message(message: tuple[Any, ...]) -> bool:
            kind = message[0]
            seen[kind] = message[1:]
            if kind == "reached":
                owner, epoch = seen["lease"]
                release = partial(leasable(parent).release, Lease(RUN, owner, epoch))
                competitor.append(Competitor(release, fail_fast).watch())
                go.touch()
            return kind not in ("done", "error")

        try:
            exitcode = stream_spawned(
                _child_holds_window,
                (site.location, str(go)),
                CHILD_TIMEOUT_S,
                on_message,
            )
        finally:
            go.touch()  # a child still paused goes on and ends
        if "error" in seen:
            require(False, f"the child's acquire failed: {seen['error'][0]}")
        if "done" not in seen:
            not_run(
                f"a spawned child process exited (code {exitcode}) without "
                "reporting; the calling program's main module must be importable "
                "and guard its entry point with if __name__ == '__main__'"
            )
        if not competitor:
            not_run(
                "the store never reached the after-fence-check failpoint of an "
                "append in the child, so no window can be forced open"
            )
        (racer,) = competitor
        refused_or_waiting(
            racer,
            "a release from another process",
            "between its fence check and its commit in a child process (a lock "
            "or lock key kept per process excludes nobody in another: X12)",
        )
        racer.finish()


def locations_independent(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations) as here, at_fresh_location(locations) as there:
        writer = here.open()
        other = there.open(fail_fast=there.location.contention)
        lease = leasable(writer).acquire(RUN, "here")
        probe = dry_hits(
            partial(writer.journal.append, RUN, entry(None, "probe", 0), lease),
            "a leased append",
        )
        if not probe:
            not_run(
                "the store never calls rulvar_store.backend.hit, so no window can "
                "be forced open"
            )
        if ("append", WINDOW_POINT) not in probe:
            not_run(
                "the store never reaches an append's after-fence-check failpoint, "
                "so no window can be held open"
            )
        pause = FailpointPause(0)
        stuck = Background(
            partial(writer.journal.append, RUN, entry(1, "here", 1), lease),
            before=pause.aim,
        )

        def hook(operation: str, point: Failpoint) -> None:
            if point == WINDOW_POINT:
                pause.hook(operation, point)

        def elsewhere() -> None:
            taken = leasable(other).acquire(RUN, "there")
            other.journal.append(RUN, entry(1, "there", 1), taken)

        with installed(hook):
            stuck.start()
            if not pause.reached.wait(PAUSE_LIMIT_S):
                pause.release()
                require(False, f"the append did not reach {WINDOW_POINT} again")
            racer = Background(elsewhere).start()
            try:
                finished = racer.wait(ELSEWHERE_PATIENCE_S)
            finally:
                pause.release()
            require(stuck.wait(PAUSE_LIMIT_S), "the paused append never finished")
            racer.wait(PAUSE_LIMIT_S)
        require(
            finished,
            f"an acquire and append of {RUN!r} at a second location waited "
            f"{ELSEWHERE_PATIENCE_S:.0f} s for a writer standing in its window at the "
            "first: the two locations share a lock (X11)",
        )
        require(
            racer.outcome.ok,
            f"expected an acquire and append of {RUN!r} at a second location to "
            f"succeed while a writer at the first stood in its window, observed "
            f"{racer.outcome.error!r}: the two locations share a lock (X11)",
        )
        require(stuck.outcome.ok, f"the paused append failed: {stuck.outcome.error!r}")
