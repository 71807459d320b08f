"""Store locations: one isolated place a store lives, opened as often as a test needs.

A conformance check that races two handles, a kill-point child that dies inside a
transaction and the soak's writer processes all need more than "a fresh store":
they need a fresh *location* (a file, a directory, a schema, an in-process domain)
that can be opened again, in this process or in a spawned child, with its own ttl
and, where the store accepts one, an injected clock. ``StoreLocation`` is that
shape; ``LocationFactory`` makes a new isolated one per call.

What a location cannot do is declared, never guessed: ``shared`` (handles opened
here see one state), ``clock`` (``now=`` is honoured), ``processes`` (the opener
works in a spawned child after being pickled with dill) and ``contention``
(``fail_fast=True`` handles raise ``StoreBusyError`` quickly while another handle
holds the write lock). The kit reports a check that needs a missing ability as
*not run, with the reason*.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from rulvar_store._location_records import (
    FreshStoreFactory,
    LocationFactory,
    OpenedStore,
    StoreLocation,
)
from rulvar_store._plugins import open_store
from rulvar_store._records import Clock

__all__ = ["UrlOpener", "locations_from_factory", "opened_at"]


@dataclass(frozen=True)
class UrlOpener:
    """Opens ``url`` through the backend registry; picklable, so children can use it.

    ``options`` are passed to every open; ``fail_fast_options`` only to handles
    opened with ``fail_fast=True`` (for example a short busy or lock timeout).
    """

    url: str
    options: Mapping[str, Any] = field(default_factory=dict)
    fail_fast_options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        options = dict(self.options)
        if ttl_ms is not None:
            options["ttl_ms"] = ttl_ms
        if now is not None:
            options["now"] = now
        if fail_fast:
            options.update(self.fail_fast_options)
        return open_store(self.url, **options)


@dataclass(frozen=True)
class _FactoryOpener:
    fresh: FreshStoreFactory

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        return self.fresh(ttl_ms)


def locations_from_factory(fresh: FreshStoreFactory) -> LocationFactory:
    """Adapt a plain fresh-store factory: each location opens one store, once.

    Such a location declares no ability (it cannot be opened a second time, takes
    no clock, cannot go to a child), so the checks that need one are not run.
    """
    numbers = count()

    def make() -> StoreLocation:
        return StoreLocation(
            name=f"fresh store {next(numbers)}",
            opener=_FactoryOpener(fresh),
            shared=False,
            clock=False,
            processes=False,
            contention=False,
        )

    return make


@contextmanager
def opened_at(
    location: StoreLocation, ttl_ms: int | None = None
) -> Iterator[OpenedStore]:
    """Open one handle on ``location``; on exit close it, then remove the location.

    A close or cleanup error after a failed body is dropped, so the real failure
    stays visible.
    """
    opened = location.open(ttl_ms)
    try:
        yield opened
    except BaseException:
        with suppress(Exception):
            opened.close()
        with suppress(Exception):
            location.remove()
        raise
    try:
        opened.close()
    finally:
        location.remove()
