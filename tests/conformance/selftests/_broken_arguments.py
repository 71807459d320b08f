"""Seeded defects for the argument-rules suite: stores that bend a rule instead of refusing.

Each is an honest ``MemoryStore`` with one habit a store author might have:

- ``Sanitizing``: "repairs" bad arguments (escapes ``/``, fills an empty id or
  owner, drops a lease that is not a ``Lease``, reads a bad filter as none,
  encodes a ``str`` blob) and goes on;
- ``KeysStringified``: round-trips every record through ``json`` first, so
  ``{1: 2}`` is stored as ``{"1": 2}`` and a set as its ``str``;
- ``RetryableRefusals``: refuses, but as a retryable ``StoreUnavailableError``;
- ``UntypedOddReads``: reads of an id with ``/`` raise a bare ``ValueError``;
- ``clamped_ttl_locations``: the opener replaces a bad ttl by its default;
- ``LAX_OPTIONS``: a backend whose ``open`` ignores every URL option;
- ``UncheckedLastRef``: a blob twin whose ``last_ref`` answers any prefix,
  another run's or a non-str one's, instead of refusing it (T12).
- ``UncheckedGetUnder``: the same for ``get_under`` (T13).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count
from typing import Any

from rulvar_store import (
    InvalidArgumentError,
    Lease,
    MemoryStore,
    OpenedStore,
    RunFilter,
    StoreUnavailableError,
)
from rulvar_store.backend import Backend, LocationFactory, StoreLocation, StoreUrl


def _fixed(value: object) -> Any:
    """What a sanitizing author does with a bad id: make it acceptable."""
    if not isinstance(value, str):
        return str(value)
    cleaned = "".join(c for c in value if c.isprintable() and c != "\x00")
    cleaned = cleaned.replace("/", "%2F").encode("utf-8", "replace").decode()
    return (cleaned or "_")[:255]


def _fixed_lease(lease: object) -> Lease | None:
    return lease if isinstance(lease, Lease) and type(lease.epoch) is int else None


class Sanitizing(MemoryStore):  # type: ignore[misc]  # MemoryStore is final; the habit is the point
    """Accepts what the rules refuse, after "repairing" it."""

    def append(self, run_id: Any, entry: Any, lease: Any = None) -> None:
        super().append(_fixed(run_id), entry, _fixed_lease(lease))

    def put_meta(self, meta: Any, lease: Any = None) -> None:
        if isinstance(meta, dict) and "runId" in meta:
            meta = {**meta, "runId": _fixed(meta["runId"])}
        super().put_meta(meta, _fixed_lease(lease))

    def acquire(self, run_id: Any, owner: Any) -> Lease:
        return super().acquire(_fixed(run_id), _fixed(owner))

    def load(self, run_id: Any) -> Any:
        return super().load(_fixed(run_id))

    def get_meta(self, run_id: Any) -> Any:
        return super().get_meta(_fixed(run_id))

    def delete(self, run_id: Any, lease: Any = None) -> None:
        super().delete(_fixed(run_id), _fixed_lease(lease))

    def list_runs(self, run_filter: Any = None) -> Any:
        return super().list_runs(
            run_filter if isinstance(run_filter, RunFilter) else None
        )


class _SanitizingBlobs:
    """The twin's side of ``Sanitizing``."""

    fenced_writes = True

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _ref(self, ref: object) -> str:
        run, _, rest = str(ref).partition("/")
        return f"{_fixed(run)}/{_fixed(rest)}"

    def put(self, ref: Any, blob: Any, lease: Any = None) -> None:
        data = blob.encode() if isinstance(blob, str) else bytes(blob or b"")
        self._inner.put(self._ref(ref), data, _fixed_lease(lease))

    def get(self, ref: Any) -> bytes | None:
        result: bytes | None = self._inner.get(self._ref(ref))
        return result

    def list_refs(self, run_id: Any) -> list[str]:
        refs: list[str] = self._inner.list_refs(_fixed(run_id))
        return refs

    def delete(self, ref: Any, lease: Any = None) -> None:
        self._inner.delete(self._ref(ref), _fixed_lease(lease))


class KeysStringified(MemoryStore):  # type: ignore[misc]  # MemoryStore is final; the habit is the point
    """Stores what ``json.dumps(..., default=str)`` makes of a record."""

    def append(self, run_id: Any, entry: Any, lease: Any = None) -> None:
        if isinstance(entry, dict):
            entry = json.loads(json.dumps(entry, default=str))
        super().append(run_id, entry, lease)

    def put_meta(self, meta: Any, lease: Any = None) -> None:
        if isinstance(meta, dict):
            meta = json.loads(json.dumps(meta, default=str))
        super().put_meta(meta, lease)


def _retryable(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except InvalidArgumentError as exc:
        raise StoreUnavailableError(f"try again later: {exc}") from exc


class RetryableRefusals(MemoryStore):  # type: ignore[misc]  # MemoryStore is final; the habit is the point
    """Refuses reads of bad ids as if the store were unreachable (retryable)."""

    def load(self, run_id: Any) -> Any:
        return _retryable(lambda: MemoryStore.load(self, run_id))

    def get_meta(self, run_id: Any) -> Any:
        return _retryable(lambda: MemoryStore.get_meta(self, run_id))

    def delete(self, run_id: Any, lease: Any = None) -> None:
        _retryable(lambda: MemoryStore.delete(self, run_id, lease))


class UntypedOddReads(MemoryStore):  # type: ignore[misc]  # MemoryStore is final; the habit is the point
    """Keeps ``/`` out of its keys with a bare ``ValueError`` on reads too."""

    def load(self, run_id: Any) -> Any:
        if isinstance(run_id, str) and "/" in run_id:
            raise ValueError(f"run ids may not contain '/': {run_id!r}")
        return super().load(run_id)


class UncheckedLastRef:
    """A blob twin whose ``last_ref`` matches any prefix against every stored ref."""

    fenced_writes = True

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def last_ref(self, run_id: Any, prefix: Any) -> str | None:
        text = str(prefix)
        refs = [
            ref for ref in self._inner.list_refs(str(run_id)) if ref.startswith(text)
        ]
        return max(refs, default=None)


class UncheckedGetUnder(UncheckedLastRef):
    """A blob twin whose ``get_under`` matches any prefix against every stored ref."""

    def get_under(self, run_id: Any, prefix: Any) -> list[tuple[str, bytes]]:
        text = str(prefix)
        return [
            (ref, self._inner.get(ref))
            for ref in self._inner.list_refs(str(run_id))
            if ref.startswith(text)
        ]


def locations_of(
    cls: type[MemoryStore], *, twin: Callable[[Any], Any] | None = None
) -> LocationFactory:
    """Fresh memory domains, handles of ``cls`` (and its twin wrapped by ``twin``)."""
    numbers = count()

    def fresh() -> StoreLocation:
        number = next(numbers)

        def opener(ttl_ms: int | None, now: Any, fail_fast: bool) -> OpenedStore:
            store = cls(ttl_ms=600_000 if ttl_ms is None else ttl_ms, now=now)
            blobs = store.transcripts()
            return OpenedStore(store, twin(blobs) if twin else blobs, (store.close,))

        return StoreLocation(
            name=f"{cls.__name__} {number}", opener=opener, processes=False
        )

    return fresh


def sanitizing_locations() -> LocationFactory:
    return locations_of(Sanitizing, twin=_SanitizingBlobs)


def clamped_ttl_locations() -> LocationFactory:
    """An opener that puts its default in place of a ttl it does not like."""

    def fresh() -> StoreLocation:
        def opener(ttl_ms: Any, now: Any, fail_fast: bool) -> OpenedStore:
            good = type(ttl_ms) is int and 0 < ttl_ms < 2**31
            store = MemoryStore(ttl_ms=ttl_ms if good else 600_000, now=now)
            return OpenedStore(store, store.transcripts(), (store.close,))

        return StoreLocation(name="clamped ttl", opener=opener, processes=False)

    return fresh


def _lax_open(url: StoreUrl) -> OpenedStore:
    store = MemoryStore()  # url.options never read: every option is ignored
    return OpenedStore(store, store.transcripts(), (store.close,))


LAX_OPTIONS = Backend(
    name="lax",
    schemes=("lax",),
    open=_lax_open,
    capabilities=frozenset({"leases", "meta_lookup", "fenced_writes"}),
    description="a backend whose open ignores URL options",
)
