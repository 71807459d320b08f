"""Record types of an opened store and of a store location, with no behaviour of their own.

They sit apart from ``_plugins`` (which opens stores by URL) and ``_locations``
(which builds locations from URLs and factories) because both of those need them:
``Backend.certify`` yields a ``LocationFactory`` and ``UrlOpener`` opens through the
registry. Kept here, neither module imports the other's types back (no circle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from rulvar_store._protocols import JournalStore, TranscriptStore
from rulvar_store._records import Clock

__all__ = [
    "LOCATION_FEATURES",
    "FreshStoreFactory",
    "LocationFactory",
    "LocationOpener",
    "NetworkRoute",
    "OpenedStore",
    "StoreLocation",
]


class _Closeable(Protocol):
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class OpenedStore:
    """A journal store and the transcript store that belongs with it."""

    journal: JournalStore
    transcripts: TranscriptStore
    closers: Sequence[Callable[[], None]] = ()

    def close(self) -> None:
        """Close what the opener opened, transcripts first (the twin shares the journal)."""
        for close in self.closers:
            close()

    def __enter__(self) -> OpenedStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


FreshStoreFactory = Callable[[int | None], OpenedStore]
"""Opens a fresh, isolated store (new file, schema or domain) with the given ttl."""


LOCATION_FEATURES: Final = ("shared", "clock", "processes", "contention")
"""Abilities a location may declare; checks name the ones they need."""


class LocationOpener(Protocol):
    """Opens one handle on a location: ``(ttl_ms, now, fail_fast) -> OpenedStore``.

    ``ttl_ms=None`` keeps the store's default ttl and ``now=None`` its own clock.
    ``fail_fast=True`` asks for a handle whose wait for a contended write lock is
    short, so contention surfaces as ``StoreBusyError`` within a check's patience.
    """

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore: ...


@dataclass(frozen=True)
class NetworkRoute:
    """How a location's handles reach their server over TCP, for fault checks.

    Attributes:
        address: the server's ``(host, port)``.
        via: returns an opener whose handles connect to the given ``(host,
            port)`` instead, with everything else the same: the kit puts a
            fault proxy there (a link that stalls) and opens through it.
    """

    address: tuple[str, int]
    via: Callable[[str, int], LocationOpener]


@dataclass(frozen=True)
class StoreLocation:
    """A fresh isolated location and the way to open handles on it.

    Attributes:
        name: what reports show (a path, a schema); never a password.
        opener: opens a handle; must survive dill pickling when ``processes``.
        shared: every handle opened here sees the same journals, leases and blobs.
        clock: the opener honours ``now``.
        processes: the opener works in a spawned child process.
        contention: ``fail_fast`` handles raise ``StoreBusyError`` while another
            handle holds the location's write lock.
        cleanup: removes the location (after its handles are closed); runs in the
            process that made the location, never in a child.
        route: for a store reached over TCP, its ``NetworkRoute`` (the
            stalled-link check needs one); ``None`` otherwise.
    """

    name: str
    opener: LocationOpener
    shared: bool = True
    clock: bool = True
    processes: bool = True
    contention: bool = False
    cleanup: Callable[[], None] | None = field(default=None, compare=False)
    route: NetworkRoute | None = field(default=None, compare=False)

    def open(
        self,
        ttl_ms: int | None = None,
        *,
        now: Clock | None = None,
        fail_fast: bool = False,
    ) -> OpenedStore:
        """Open one more handle on this location."""
        return self.opener(ttl_ms, now, fail_fast)

    @property
    def features(self) -> frozenset[str]:
        """The abilities this location declares, by the names of ``LOCATION_FEATURES``."""
        flags = {
            "shared": self.shared,
            "clock": self.clock,
            "processes": self.processes,
            "contention": self.contention,
        }
        return frozenset(name for name, present in flags.items() if present)

    def remove(self) -> None:
        """Run ``cleanup`` if there is one; a location is removed at most by its maker."""
        if self.cleanup is not None:
            self.cleanup()


LocationFactory = Callable[[], StoreLocation]
"""Makes a new isolated location per call (a new file, directory, schema or domain)."""
