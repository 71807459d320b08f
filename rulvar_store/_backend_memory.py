"""The ``memory://`` backend: each open is a fresh in-process fencing domain."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rulvar_store._memory import MemoryStore
from rulvar_store._plugins import Backend, FreshStoreFactory, OpenedStore, hookimpl
from rulvar_store._records import DEFAULT_LEASE_TTL_MS
from rulvar_store._urls import StoreUrl, option_int
from rulvar_store.errors import ConfigError

__all__ = ["rulvar_store_backends"]


def _opened(store: MemoryStore) -> OpenedStore:
    return OpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.close,)
    )


def _open(url: StoreUrl) -> OpenedStore:
    unknown = set(url.options) - {"ttl_ms"}
    if unknown:
        raise ConfigError(
            f"memory:// takes only ttl_ms, not {', '.join(sorted(unknown))}"
        )
    if url.parts.netloc or url.parts.path not in ("", "/"):
        raise ConfigError(f"memory:// takes no location, got {url.redacted!r}")
    return _opened(
        MemoryStore(ttl_ms=option_int(url.options, "ttl_ms", DEFAULT_LEASE_TTL_MS))
    )


@contextmanager
def _certify(url: StoreUrl) -> Iterator[FreshStoreFactory]:
    _open(url).close()  # validate the URL once, before any check runs

    def fresh(ttl_ms: int | None) -> OpenedStore:
        return _opened(MemoryStore(ttl_ms=ttl_ms or DEFAULT_LEASE_TTL_MS))

    yield fresh


@hookimpl
def rulvar_store_backends() -> Sequence[Backend]:
    return [
        Backend(
            name="memory",
            schemes=("memory",),
            open=_open,
            capabilities=frozenset(
                {"leases", "meta_lookup", "fenced_writes", "fenced_transcripts"}
            ),
            certify=_certify,
            description="in-process, fenced; one domain per open (tests, examples)",
        )
    ]
