"""Certifying the asyncio path: the same suites through ``open_store_async``, plus cancellation and loop health.

Every location is opened through the async API (the backend's native opener,
or the generic adapter) and handed to the suites behind the sync facade, so
the forced-races, thread-races and shared-handle suites race real threads
into the async store. The cancellation suite then cancels awaiting callers
inside every write, and the loop-health suite measures what the store does to
its callers' event loops (the longest stall, close, several loops; Y6-Y8).
Suite names carry an ``(async)`` suffix in reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from rulvar_conformance.harness.async_facade import async_locations
from rulvar_conformance.harness.certify import Certification, certification_suites
from rulvar_conformance.harness.kit import ConformanceSuite
from rulvar_conformance.suites.cancellation import cancellation_conformance
from rulvar_conformance.suites.loop_health import loop_health_conformance

__all__ = ["ASYNC_SUFFIX", "async_locations", "async_suites"]

ASYNC_SUFFIX = " (async)"

# Suites about the machinery under the store's files (power cuts, a full disk,
# a writer SIGKILLed mid-file): the asyncio path writes through the same files
# and code, so running them again behind the async facade would prove nothing
# new (and its locations carry no URL for the fault layers to find the files by).
MACHINE_SUITES = frozenset({"power-loss", "disk-faults", "file-machinery"})
# The LangGraph suite certifies the savers: it drives AsyncRulvarSaver over the
# async API itself (LangGraph's conformance suite), so it runs once.
# The replaced-file check finds the database file by the location's URL, which
# the async facade's locations do not carry; the async path shares the door.
# The server-clock check reads the store's lease_clock marker, which the facade
# hides; the async PostgreSQL store shares the sync one's plans and clock.
# The pool-fairness check opens its own handle by URL with a one-connection pool;
# the forgotten-statements suite opens its own handles through its proxy and has
# an asyncio row of its own.
SYNC_PATH_ONLY = MACHINE_SUITES | {
    "langgraph",
    "replaced-file",
    "server-clock",
    "pool-fairness",
    "forgotten-statements",
}


# Durability rows whose subject the asyncio path has elsewhere: a blob-only batch
# goes through the same door as an append (ack-survives-sigkill runs), and close
# under queued coroutines is loop-health's async-close-drains (Y7).
SYNC_PATH_ONLY_CHECKS = frozenset(
    {"blob-ack-survives-sigkill", "close-keeps-acknowledged"}
)


def _async_twin(suite: ConformanceSuite) -> ConformanceSuite:
    checks = tuple(c for c in suite.checks if c.id not in SYNC_PATH_ONLY_CHECKS)
    return replace(suite, name=suite.name + ASYNC_SUFFIX, checks=checks)


def async_suites(
    certification: Certification, selection: Iterable[str] | None = None
) -> list[ConformanceSuite]:
    """The selected suites over async-opened locations, then cancellation and loop health.

    A selection of machine suites only (``--suite power-loss``) has nothing to
    run on the async path, so it gets no cancellation suite either.

    Raises:
        KeyError: ``selection`` names an unknown suite.
    """
    facade = certification._replace(locations=async_locations(certification.locations))
    suites = [
        _async_twin(suite)
        for suite in certification_suites(facade, selection)
        if suite.name not in SYNC_PATH_ONLY
    ]
    if not suites:
        return []
    cancellation = cancellation_conformance(certification)
    health = loop_health_conformance(certification)
    return [
        *suites,
        replace(cancellation, name=cancellation.name + ASYNC_SUFFIX),
        replace(health, name=health.name + ASYNC_SUFFIX),
    ]
