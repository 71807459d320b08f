"""Checks over locations: open several handles on one place, inject a clock, clean up.

``at_fresh_location`` gives a check a fresh ``StoreLocation`` wrapped in a
``Site``; every handle the check opens through the site is closed, and the
location removed, when the check ends. A check that needs an ability the
location does not declare (a second handle, a clock, contention) stops as not
run, with the reason, instead of passing vacuously.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Final

from rulvar_conformance.harness.kit import not_run
from rulvar_store import Clock, OpenedStore
from rulvar_store.backend import LocationFactory, StoreLocation

__all__ = ["FEATURE_REASONS", "ManualClock", "Site", "at_fresh_location"]

FEATURE_REASONS: Final = {
    "shared": "a second handle on the same location",
    "clock": "an injected clock (now=)",
    "processes": "opening the location in a spawned child process",
    "contention": "a fail-fast handle that raises StoreBusyError under contention",
}
"""What each location ability gives a check, for not-run reasons."""

START_MS: Final = 1_700_000_000_000


class ManualClock:
    """A thread-safe clock in Unix ms that moves only when told to (D8).

    Pass the instance as ``now=``; handles sharing it see one time.
    """

    def __init__(self, start_ms: int = START_MS) -> None:
        self._lock = threading.Lock()
        self._now_ms = start_ms

    def __call__(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, delta_ms: int) -> int:
        """Move the clock forward by ``delta_ms`` and return the new time."""
        with self._lock:
            self._now_ms += delta_ms
            return self._now_ms

    def set(self, now_ms: int) -> None:
        """Put the clock at ``now_ms``."""
        with self._lock:
            self._now_ms = now_ms


class Site:
    """One location under one check, and every handle opened on it so far."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self._opened: list[OpenedStore] = []

    def open(
        self,
        ttl_ms: int | None = None,
        *,
        now: Clock | None = None,
        fail_fast: bool = False,
    ) -> OpenedStore:
        """Open a handle; a second one needs a ``shared`` location, ``now`` a ``clock``.

        Handles are closed by the site when the check ends.
        """
        if self._opened and not self.location.shared:
            not_run(f"needs {FEATURE_REASONS['shared']}; {self._declines()}")
        if now is not None and not self.location.clock:
            not_run(f"needs {FEATURE_REASONS['clock']}; {self._declines()}")
        if fail_fast and not self.location.contention:
            not_run(f"needs {FEATURE_REASONS['contention']}; {self._declines()}")
        opened = self.location.open(ttl_ms, now=now, fail_fast=fail_fast)
        self._opened.append(opened)
        return opened

    def _declines(self) -> str:
        return f"location {self.location.name!r} does not offer it"

    def close(self) -> None:
        """Close every handle (newest first), then remove the location."""
        try:
            while self._opened:
                self._opened.pop().close()
        finally:
            self.location.remove()


@contextmanager
def at_fresh_location(
    locations: LocationFactory, *, needs: Iterable[str] = ()
) -> Iterator[Site]:
    """Yield a ``Site`` on a fresh location that declares every ability in ``needs``.

    A missing ability stops the check as not run. A close error after a failed
    body is dropped so the real failure stays visible.
    """
    location = locations()
    missing = [feature for feature in needs if feature not in location.features]
    if missing:
        with suppress(Exception):
            location.remove()
        wanted = "; ".join(FEATURE_REASONS.get(name, name) for name in missing)
        not_run(f"needs {wanted}; location {location.name!r} does not offer it")
    site = Site(location)
    try:
        yield site
    except BaseException:
        with suppress(Exception):
            site.close()
        raise
    site.close()
