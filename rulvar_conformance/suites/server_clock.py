"""``server-clock``: lease times come from the server's clock, not the client host's (P5).

For a store that declares ``lease_clock = "server"`` (PostgreSQL): a spawned
child whose clock runs an hour late (its ``time.time`` shifted) acquires a run
and renews the lease; the parent, on a correct clock, must then be refused
(``LeaseHeldError``). A store that takes expiry times from the client host's
clock hands the child a lease that is already past its expiry on every other
host, and the parent takes the run over. A store whose lease times are the
local clock by design (SQLite, the file and memory stores: D8) does not run it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.processes import stream_spawned
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import expect_refused
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = ["SPEC", "server_clock_conformance"]

RUN: Final = "clock-run"
TTL_MS: Final = 60_000
SKEW_S: Final = -3600.0
"""The child's clock runs an hour late: far beyond any ttl."""
CHILD_LIMIT_S: Final = 60.0


def _skewed_holder(
    location: StoreLocation, skew_s: float, tried: str, send: Any
) -> None:
    """In the child: acquire and renew the run on a host whose clock is ``skew_s`` off,
    then live on until the parent has tried the run (the file ``tried`` exists)."""
    real_time, real_ns = time.time, time.time_ns
    time.time = lambda: real_time() + skew_s
    time.time_ns = lambda: real_ns() + int(skew_s * 1e9)
    try:
        opened = location.open(TTL_MS)
        journal: Any = opened.journal
        lease = journal.acquire(RUN, "late-host")
        journal.renew(lease)
        send.send(("held", lease.epoch))
    except Exception as exc:
        send.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    # The holder stays alive (the lease is left live, never released) until the
    # parent has tried the run: a dead holder's lease may be taken over at once
    # (L11), which is not what this check is about.
    deadline = time.monotonic() + CHILD_LIMIT_S
    while not os.path.exists(tried) and time.monotonic() < deadline:
        time.sleep(0.02)


def _server_clock(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        opened = site.open(TTL_MS)
        journal: Any = opened.journal
        if getattr(journal, "lease_clock", None) != "server":
            not_run(
                "the store's lease times come from the local clock by design (D8); "
                "only a store declaring lease_clock = 'server' promises P5"
            )
        heard: list[Any] = []
        outcome: list[Any] = []

        tried = os.path.join(tempfile.mkdtemp(prefix="rulvar-clock-"), "tried")

        def on_message(message: Any) -> bool:
            heard.append(message)
            if message[0] == "held":  # tried while the holder still lives
                outcome.append(attempt(partial(journal.acquire, RUN, "correct-host")))
            Path(tried).touch()  # the holder may end now
            return False

        try:
            stream_spawned(
                _skewed_holder,
                (site.location, SKEW_S, tried),
                CHILD_LIMIT_S,
                on_message,
            )
        finally:
            shutil.rmtree(os.path.dirname(tried), ignore_errors=True)
        require(
            bool(heard) and heard[0][0] == "held" and bool(outcome),
            f"the child on a late clock did not take the lease: {heard} (pid {os.getpid()})",
        )
        expect_refused(
            outcome[0],
            "an acquire on a correct clock while a host an hour late holds a live "
            "lease it just renewed (P5: lease times come from the server's clock, "
            "not the client's)",
        )


def server_clock_conformance(certification: Certification) -> ConformanceSuite:
    """The P5 check over fresh locations."""
    return ConformanceSuite(
        "server-clock",
        (
            build_check(
                "lease-times-on-server-clock",
                "a host with a clock an hour late acquires and renews: its lease "
                "still excludes a host on a correct clock",
                ("P5", "L1"),
                partial(_server_clock, certification.locations),
            ),
        ),
    )


SPEC: Final = SuiteSpec(
    "server-clock",
    server_clock_conformance,
    "leases",
    True,
    "lease times from the server's clock, whatever the client host's (P5)",
)
