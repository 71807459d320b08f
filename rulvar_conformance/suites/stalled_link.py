"""``stalled_link_conformance(locations)``: renew fails, typed and bounded, over a stalled link.

L10: a holder whose renew fails stops paid work promptly, which needs renew to
FAIL when the store cannot be reached, not to block until the link comes back.
For a location reached over TCP (its ``NetworkRoute``), the kit starts a
``FaultProxy`` in front of the server, opens a handle through it with a short
ttl, takes a lease, renews once, then stalls the proxy (connections stay open,
nothing is forwarded) and renews again. That renew must raise a retryable
store error (``StoreUnavailableError`` or ``StoreBusyError``) while the link is
still stalled. The kit waits up to ``STALL_PATIENCE_TTLS`` ttls for it: a
renew still blocked then has no client-side bound. A location without a route
(an embedded store) does not run the check.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.fault_proxy import FaultProxy
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_store import LeasableStore, RulvarError
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "STALL_PATIENCE_TTLS", "STALL_TTL_MS", "stalled_link_conformance"]

STALL_TTL_MS: Final = 2_000
"""ttl of the handle opened through the proxy."""

STALL_PATIENCE_TTLS: Final = 5
"""How many ttls the check waits for the stalled renew to fail."""

RUN: Final = "stalled-link-run"


def _renew_over_stalled_link(locations: LocationFactory) -> None:
    location = locations()
    try:
        route = location.route
        if route is None:
            not_run(
                f"location {location.name!r} declares no TCP route (NetworkRoute): "
                "nothing to stall"
            )
            return
        with FaultProxy(route.address) as proxy:
            opened = route.via(*proxy.address)(STALL_TTL_MS, None, False)
            try:
                journal = opened.journal
                require(
                    isinstance(journal, LeasableStore),
                    "the store has no leases (acquire/renew/release)",
                )
                assert isinstance(journal, LeasableStore)
                lease = journal.acquire(RUN, "stalled-holder")
                journal.renew(lease)  # the link works: a renew through the proxy
                proxy.stall()
                _require_bounded_failure(journal, lease)
                proxy.resume()
            finally:
                proxy.resume()
                opened.close()
    finally:
        location.remove()


def _require_bounded_failure(journal: LeasableStore, lease: object) -> None:
    outcome: list[BaseException | None] = []
    started = time.monotonic()

    def renew() -> None:
        try:
            journal.renew(lease)  # type: ignore[arg-type]
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=renew, name="stalled-renew", daemon=True)
    worker.start()
    patience_s = STALL_PATIENCE_TTLS * STALL_TTL_MS / 1000
    worker.join(patience_s)
    waited_ms = round((time.monotonic() - started) * 1000)
    require(
        not worker.is_alive(),
        f"renew (ttl {STALL_TTL_MS} ms) over a stalled link was still blocked after "
        f"{waited_ms} ms: every call needs a client-side bound, so a holder learns "
        "it cannot renew before its lease expires (L10)",
    )
    error = outcome[0]
    require(
        error is not None,
        "renew over a stalled link succeeded: the link was not stalled",
    )
    require(
        isinstance(error, RulvarError) and error.retryable,
        f"renew over a stalled link raised {type(error).__module__}."
        f"{type(error).__name__}: {error}; expected a retryable store error "
        "(StoreUnavailableError or StoreBusyError)",
    )


def stalled_link_conformance(certification: Certification) -> ConformanceSuite:
    """Build the stalled-link suite (L10) over fresh locations."""
    check = build_check(
        "renew-fails-over-stalled-link",
        "renew over a stalled link raises a retryable store error, bounded (L10)",
        ("L10",),
        partial(_renew_over_stalled_link, certification.locations),
    )
    return ConformanceSuite("stalled-link", (check,))


SPEC: Final = SuiteSpec(
    "stalled-link",
    stalled_link_conformance,
    "leases",
    True,  # seconds on a networked store; an embedded one does not run it
    "a fault proxy stalls the link: renew fails, typed and bounded (L10)",
)
