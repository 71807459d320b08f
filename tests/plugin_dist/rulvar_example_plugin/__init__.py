"""A third-party backend plugin: ``example://`` (honest) and ``broken-example://``.

The broken backend forgets the fence on append, so certifying it must fail the
kit's ``fencing-stale-epoch`` check.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from rulvar_store import (
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


def _honest(ttl_ms: int | None) -> OpenedStore:
    store = MemoryStore(ttl_ms=ttl_ms or 60_000)
    return OpenedStore(journal=store, transcripts=store.transcripts())


def _broken(ttl_ms: int | None) -> OpenedStore:
    store = MemoryStore(ttl_ms=ttl_ms or 60_000)
    return OpenedStore(
        journal=ForgetfulFenceStore(store), transcripts=store.transcripts()
    )


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
            open=lambda url: _honest(None),
            capabilities=CAPABILITIES,
            certify=_certifier(_honest),
            description="third-party example backend (honest)",
        ),
        Backend(
            name="broken-example",
            schemes=("broken-example",),
            open=lambda url: _broken(None),
            capabilities=CAPABILITIES,
            certify=_certifier(_broken),
            description="third-party example backend whose append ignores the fence",
        ),
    ]
