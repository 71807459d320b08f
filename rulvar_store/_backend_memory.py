"""The ``memory://`` backend: each open is a fresh in-process fencing domain."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count

from rulvar_store._location_records import LocationFactory, OpenedStore, StoreLocation
from rulvar_store._memory import MemoryStore, _MemoryDomain
from rulvar_store._plugins import Backend, hookimpl
from rulvar_store._records import DEFAULT_LEASE_TTL_MS, Clock
from rulvar_store._urls import StoreUrl, option_int
from rulvar_store.errors import ConfigError

__all__ = ["rulvar_store_backends"]


def _opened(store: MemoryStore) -> OpenedStore:
    return OpenedStore(
        journal=store, transcripts=store.transcripts(), closers=(store.close,)
    )


def _open(url: StoreUrl) -> OpenedStore:
    unknown = set(url.options) - {"ttl_ms", "now"}
    if unknown:
        raise ConfigError(
            f"memory:// takes only ttl_ms (and now= as a keyword), not "
            f"{', '.join(sorted(unknown))}"
        )
    if url.parts.netloc or url.parts.path not in ("", "/"):
        raise ConfigError(f"memory:// takes no location, got {url.redacted!r}")
    now = url.options.get("now")
    if now is not None and not callable(now):
        raise ConfigError("memory:// option now must be a clock callable")
    return _opened(
        MemoryStore(
            ttl_ms=option_int(url.options, "ttl_ms", DEFAULT_LEASE_TTL_MS), now=now
        )
    )


@dataclass(frozen=True)
class _DomainOpener:
    """Opens handles on one in-process domain; meaningless in another process."""

    domain: _MemoryDomain

    def __call__(
        self, ttl_ms: int | None, now: Clock | None, fail_fast: bool
    ) -> OpenedStore:
        # ``None`` only means "the default": a zero or negative ttl must reach
        # the store, which refuses it (D9), instead of becoming the default.
        ttl = DEFAULT_LEASE_TTL_MS if ttl_ms is None else ttl_ms
        return _opened(MemoryStore(ttl_ms=ttl, now=now, _domain=self.domain))


@contextmanager
def _certify(url: StoreUrl) -> Iterator[LocationFactory]:
    _open(url).close()  # validate the URL once, before any check runs
    numbers = count()

    def fresh() -> StoreLocation:
        return StoreLocation(
            name=f"memory domain {next(numbers)}",
            opener=_DomainOpener(_MemoryDomain()),
            processes=False,
        )

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
