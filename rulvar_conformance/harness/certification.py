"""What every suite is built from: a ``Certification``, and the registry's entry type.

A ``Certification`` names where the stores live: a ``LocationFactory`` of fresh
isolated locations (CONTRACT 8.1; a location can be opened again, in this
process or a spawned child), the backend's declared capabilities and the short
ttl of the wall-clock expiry check. Every registered suite is built by one
``SuiteSpec.build(certification)``.

Suites written over "a fresh store per check" (the classic four) take their
stores through ``fresh_store``: a context that opens a fresh location and, on
leaving, closes what it opened and removes the location.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, NamedTuple

from rulvar_conformance.harness.kit import using
from rulvar_conformance.harness.surfaces import leasable
from rulvar_store import JournalStore, LeasableStore, OpenedStore
from rulvar_store.backend import Backend, LocationFactory, StoreUrl

if TYPE_CHECKING:
    from rulvar_conformance.harness.kit import ConformanceSuite

__all__ = [
    "CERTIFY_EXPIRY_TTL_MS",
    "CERTIFY_TTL_MS",
    "Certification",
    "SuiteSpec",
    "by_url",
    "fresh_journal",
    "fresh_leasable",
    "fresh_store",
]

CERTIFY_TTL_MS: Final = 600_000
"""ttl of the stores the mandatory checks use: no stall can expire a lease."""

CERTIFY_EXPIRY_TTL_MS: Final = 600
"""ttl of the stores the wall-clock expiry check uses."""


class Certification(NamedTuple):
    """What a certification runs against: fresh locations, capabilities, expiry ttl.

    ``url`` and ``backend``, when certifying by URL, let checks open the backend
    with URLs of their own (the URL-options rule); without them those checks
    use the locations' own URLs, or report not run.
    """

    locations: LocationFactory
    capabilities: frozenset[str]
    expiry_ttl_ms: int = CERTIFY_EXPIRY_TTL_MS
    url: StoreUrl | None = None
    backend: Backend | None = None


def by_url(
    locations: LocationFactory, url: StoreUrl, backend: Backend
) -> Certification:
    """The certification of ``backend`` at ``url``, over its certify()'s locations."""
    return Certification(
        locations,
        backend.capabilities,
        backend.certify_expiry_ttl_ms,
        url=url,
        backend=backend,
    )


@dataclass(frozen=True)
class SuiteSpec:
    """One registered suite: how to build it, what calls for it, whether it is default.

    Attributes:
        name: the suite name ``--suite`` selects and reports show.
        build: builds the suite for a certification (must not open anything).
        capability: the backend capability that calls for it (``None``: always).
        default: part of a plain ``rulvar check``; others run when selected.
        description: one line for listings.
    """

    name: str
    build: Callable[[Certification], ConformanceSuite]
    capability: str | None = None
    default: bool = True
    description: str = ""


@contextmanager
def fresh_store(
    certification: Certification, ttl_ms: int | None
) -> Iterator[OpenedStore]:
    """A store opened at its own fresh location; closed and the location removed after.

    A close error after a failed check is dropped (``using``), so the check's own
    failure stays visible; the location is removed either way.
    """
    location = certification.locations()
    try:
        with using(partial(location.open, ttl_ms)) as opened:
            yield opened
    finally:
        location.remove()


@contextmanager
def fresh_journal(
    certification: Certification, ttl_ms: int | None
) -> Iterator[JournalStore]:
    """``fresh_store``'s journal."""
    with fresh_store(certification, ttl_ms) as opened:
        yield opened.journal


@contextmanager
def fresh_leasable(
    certification: Certification, ttl_ms: int | None
) -> Iterator[LeasableStore]:
    """``fresh_store``'s journal as a leasable store (suites gated on ``leases``)."""
    with fresh_store(certification, ttl_ms) as opened:
        yield leasable(opened)
