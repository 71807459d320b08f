"""``typed_errors_conformance(certification)``: contention is a typed error.

D16 (section 1.6): when a write waits for another handle's lock past its bound,
the caller gets the retryable ``StoreBusyError`` (code ``store_busy``) and nothing
is written; no driver exception ever crosses the SPI. The check holds the lock
deterministically: handle ``b`` is paused inside its own write, at its
``before-commit`` failpoint, while a ``fail_fast=True`` handle writes to the same
run. It needs a location that declares ``contention`` (fail-fast handles) and a
store that calls failpoints; otherwise it is not run, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.failpause import (
    Background,
    FailpointPause,
    hits_of,
    installed,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    Outcome,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.site import at_fresh_location
from rulvar_conformance.harness.surfaces import entry, leasable
from rulvar_conformance.suites._windows import FAIL_FAST_PATIENCE_S, await_pause
from rulvar_store import OpenedStore, RulvarError, StoreBusyError
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "typed_errors_conformance"]

RUN: Final = "busy-run"


def _busy(outcome: Outcome[Any], what: str) -> None:
    require(
        not outcome.ok,
        f"{what} while another handle held the run's write lock: expected "
        "StoreBusyError, observed it succeed",
    )
    error = outcome.error
    require(
        isinstance(error, StoreBusyError),
        f"{what} while another handle held the run's write lock: expected the "
        f"retryable StoreBusyError, observed {type(error).__module__}."
        f"{type(error).__name__}: {error} (D16: no driver exception crosses "
        "the SPI)",
    )
    assert isinstance(error, RulvarError)
    require(
        error.retryable is True and error.code == "store_busy",
        f"{what}: expected StoreBusyError with retryable=True and code "
        f"'store_busy', observed retryable={error.retryable!r}, code={error.code!r}",
    )


def _contention(locations: LocationFactory, caps: frozenset[str]) -> None:
    with at_fresh_location(locations, needs=("shared", "contention")) as site:
        holder, observer = site.open(), site.open()
        fast = site.open(fail_fast=True)
        hits, probe = hits_of(
            partial(holder.journal.append, "busy-probe", entry(0, "b", 0))
        )
        require(probe.ok, f"a plain append failed: {probe.error!r}")
        if ("append", "before-commit") not in hits:
            not_run(
                "the store never calls failpoint ('append', 'before-commit'), so no "
                "handle can be held inside its write transaction"
            )
        attempts: list[tuple[str, Callable[[OpenedStore], object]]] = [
            ("an append", lambda o: o.journal.append(RUN, entry(1, "a", 1))),
        ]
        if "leases" in caps:
            attempts.append(
                ("an acquire", lambda o: leasable(o).acquire(RUN, "owner-a"))
            )
        pause = FailpointPause(hits.index(("append", "before-commit")))
        with installed(pause.hook):
            held = Background(
                partial(holder.journal.append, RUN, entry(0, "b", 0)), before=pause.aim
            ).start()
            try:
                await_pause(pause, held, "the holder's append")
                outcomes = []
                for what, call in attempts:
                    tried = Background(partial(attempt, partial(call, fast))).start()
                    require(
                        tried.wait(FAIL_FAST_PATIENCE_S),
                        f"{what} through a fail-fast handle still waited after "
                        f"{FAIL_FAST_PATIENCE_S:.0f} s for the held lock",
                    )
                    result = tried.outcome.value
                    assert result is not None
                    outcomes.append((what, result))
            finally:
                pause.release()
            require(held.wait(30), "the holder's append never finished")
        require(held.outcome.ok, f"the holder's append failed: {held.outcome.error!r}")
        for what, outcome in outcomes:
            _busy(outcome, f"{what} through a fail-fast handle")
        seqs = [item.get("key") for item in observer.journal.load(RUN)]
        require(
            seqs == ["b-0"],
            f"expected only the holder's entry after the busy append, observed "
            f"{seqs} (a StoreBusyError writes nothing)",
        )
        if "leases" in caps:
            free = attempt(partial(leasable(observer).acquire, RUN, "owner-c"))
            require(
                free.ok,
                f"expected the run free after the busy acquire, observed "
                f"{free.error!r} (a StoreBusyError writes no lease)",
            )


def typed_errors_conformance(certification: Certification) -> ConformanceSuite:
    """Build the typed-errors suite (D16) over fresh locations."""
    locations, capabilities = certification.locations, certification.capabilities
    check = build_check(
        "contention-is-store-busy",
        "a write blocked by another handle's lock raises retryable StoreBusyError",
        ("D16",),
        partial(_contention, locations, capabilities),
    )
    return ConformanceSuite("typed-errors", (check,))


SPEC: Final = SuiteSpec(
    "typed-errors",
    typed_errors_conformance,
    "leases",
    True,
    "contention surfaces as the retryable StoreBusyError (D16)",
)
