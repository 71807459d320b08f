"""A third-party backend plugin: ``example://`` (honest) and seeded defects.

- ``broken-example://`` forgets the fence on append, so certifying it must fail
  the kit's ``fencing-stale-epoch`` check;
- ``crashing-example://`` segfaults its own process in ``get_meta`` (the kit's
  ``meta-separation`` check calls it), as a driver racing ``close()`` can;
- ``buggy-certify-example://`` raises in its own ``certify()``: a plugin bug;
- ``missing-driver-example://`` needs a module nobody installed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Literal

from rulvar_store import (
    ConfigError,
    JournalEntry,
    Lease,
    MemoryStore,
    OpenedStore,
    RunFilter,
    RunMeta,
)
from rulvar_store.backend import (
    Backend,
    FreshStoreFactory,
    LocationFactory,
    StoreUrl,
    hookimpl,
    locations_from_factory,
    option_int,
)

CAPABILITIES = frozenset(
    {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
)


class ForgetfulFenceStore:
    """Delegates to a MemoryStore but appends without checking the lease."""

    fenced_writes: Literal[True] = True

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.lease_ttl_ms = inner.lease_ttl_ms

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self._inner.append(run_id, entry)  # the defect: the lease is dropped

    def load(self, run_id: str) -> list[JournalEntry]:
        return self._inner.load(run_id)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        self._inner.put_meta(meta, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        return self._inner.get_meta(run_id)

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        return self._inner.list_runs(run_filter)

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        self._inner.delete(run_id, lease)

    def acquire(self, run_id: str, owner: str) -> Lease:
        return self._inner.acquire(run_id, owner)

    def renew(self, lease: Lease) -> None:
        self._inner.renew(lease)

    def release(self, lease: Lease) -> None:
        self._inner.release(lease)


class CrashingMetaStore(ForgetfulFenceStore):
    """Honest, except that ``get_meta`` kills the process with SIGSEGV."""

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        self._inner.append(run_id, entry, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        # What a crashing driver does: the fault is this thread's own. A signal
        # sent to the process may land on another thread, whose crash report
        # then shows no frame of this one (the test looked for it in vain).
        signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)
        return None


def _crashing(ttl_ms: int | None) -> OpenedStore:
    store = MemoryStore(ttl_ms=60_000 if ttl_ms is None else ttl_ms)
    return OpenedStore(
        journal=CrashingMetaStore(store), transcripts=store.transcripts()
    )


@contextmanager
def _buggy_certify(url: StoreUrl) -> Iterator[LocationFactory]:
    raise RuntimeError("scratch folder setting missing")  # the plugin's own bug
    yield  # type: ignore[unreachable]  # a generator, as a certify() is


def _honest(ttl_ms: int | None) -> OpenedStore:
    store = MemoryStore(ttl_ms=60_000 if ttl_ms is None else ttl_ms)
    return OpenedStore(journal=store, transcripts=store.transcripts())


def _broken(ttl_ms: int | None) -> OpenedStore:
    store = MemoryStore(ttl_ms=60_000 if ttl_ms is None else ttl_ms)
    return OpenedStore(
        journal=ForgetfulFenceStore(store), transcripts=store.transcripts()
    )


def _open_url(make: FreshStoreFactory, url: StoreUrl) -> OpenedStore:
    """Open by URL: the one option is ttl_ms, read as an int (D15)."""
    unknown = sorted(set(url.options) - {"ttl_ms"})
    if unknown:
        raise ConfigError(
            f"{url.scheme}:// takes only ttl_ms, not {', '.join(unknown)}"
        )
    return make(option_int(url.options, "ttl_ms", 60_000))


def _certifier(factory: FreshStoreFactory):  # type: ignore[no-untyped-def]  # returns a decorated generator
    @contextmanager
    def certify(url: StoreUrl) -> Iterator[LocationFactory]:
        # One fresh store per location: the checks that need a second handle,
        # a clock or a child process report "not run" for this backend.
        yield locations_from_factory(factory)

    return certify


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return [
        Backend(
            name="example",
            schemes=("example",),
            open=partial(_open_url, _honest),
            capabilities=CAPABILITIES,
            certify=_certifier(_honest),
            description="third-party example backend (honest)",
        ),
        Backend(
            name="broken-example",
            schemes=("broken-example",),
            open=partial(_open_url, _broken),
            capabilities=CAPABILITIES,
            certify=_certifier(_broken),
            description="third-party example backend whose append ignores the fence",
        ),
        Backend(
            name="crashing-example",
            schemes=("crashing-example",),
            open=partial(_open_url, _crashing),
            capabilities=CAPABILITIES,
            certify=_certifier(_crashing),
            description="third-party example backend whose get_meta segfaults",
        ),
        Backend(
            name="buggy-certify-example",
            schemes=("buggy-certify-example",),
            open=partial(_open_url, _honest),
            capabilities=CAPABILITIES,
            certify=_buggy_certify,
            description="third-party example backend whose certify() raises",
        ),
        Backend(
            name="missing-driver-example",
            schemes=("missing-driver-example",),
            open=partial(_open_url, _honest),
            capabilities=CAPABILITIES,
            requires=("rulvar_example_missing_driver",),
            description="third-party example backend whose driver is not installed",
        ),
    ]
