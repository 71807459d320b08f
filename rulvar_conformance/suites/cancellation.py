"""The cancellation suite: cancel an awaiting caller inside every write (CONTRACT 14).

For every write operation, and for every failpoint that operation hits (plus
the moment right after the call is started, for stores without failpoints),
a caller awaiting the write on the async path is cancelled there, as
``asyncio.timeout``, a failing ``TaskGroup`` sibling or LangGraph cancelling a
branch would. Then:

- the caller gets ``CancelledError``, and only once the call is over (Y2);
- the write is all or nothing: a second handle reads either the state before
  the write or the state after it (Y2);
- a second handle writes at once (a ``fail_fast`` handle where the location
  has contention, so a lock left behind surfaces as ``StoreBusyError``), and
  the cancelled handle itself keeps working (Y3).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.async_facade import loop_thread, open_async_at
from rulvar_conformance.harness.certification import Certification
from rulvar_conformance.harness.failpause import (
    PAUSE_LIMIT_S,
    FailpointPause,
    Hit,
    installed,
)
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    build_check,
    not_run,
    require,
)
from rulvar_store import (
    AsyncLeasableStore,
    AsyncOpenedStore,
    LeasableStore,
    Lease,
    OpenedStore,
    read_run_meta,
)
from rulvar_store.backend import (
    LocationFactory,
    StoreLocation,
    caller_identity,
    mark_caller,
)

__all__ = ["cancellation_conformance"]

RUN: Final = "cancel-run"
TTL_MS: Final = 30_000
LOOP_TURNS: Final = 5
"""Loop round trips after a cancel: enough for a task that did not wait for its
call to have finished, so a task still pending then is waiting for the call."""

Setup = Callable[[AsyncOpenedStore, Lease | None], Awaitable[None]]
Write = Callable[[AsyncOpenedStore, Lease | None], Awaitable[object]]
Read = Callable[[OpenedStore], object]


@dataclass(frozen=True)
class _WriteOp:
    name: str
    setup: Setup
    write: Write
    read: Read
    leases: bool = False  # the operation exists only on leasable stores


async def _nothing(opened: AsyncOpenedStore, lease: Lease | None) -> None:
    return None


async def _one_entry(opened: AsyncOpenedStore, lease: Lease | None) -> None:
    await opened.journal.append(RUN, {"seq": 1, "kind": "setup"}, lease)
    await opened.journal.put_meta({"runId": RUN, "status": "running"}, lease)


async def _blob(opened: AsyncOpenedStore, lease: Lease | None) -> None:
    await opened.transcripts.put(f"{RUN}/blob", b"before", lease)


def _leasable(opened: AsyncOpenedStore) -> AsyncLeasableStore:
    journal = opened.journal
    assert isinstance(journal, AsyncLeasableStore)  # the op is listed only then
    return journal


def _entries(opened: OpenedStore) -> object:
    return [entry.get("seq") for entry in opened.journal.load(RUN)]


def _meta(opened: OpenedStore) -> object:
    return read_run_meta(opened.journal, RUN)


def _blob_state(opened: OpenedStore) -> object:
    return opened.transcripts.get(f"{RUN}/blob")


def _no_state(opened: OpenedStore) -> object:
    return None  # a lease's row is not readable through the SPI; Y3 still applies


OPERATIONS: Final = (
    _WriteOp(
        "append",
        _one_entry,
        lambda o, lease: o.journal.append(RUN, {"seq": 2, "kind": "x"}, lease),
        _entries,
    ),
    _WriteOp(
        "put_meta",
        _one_entry,
        lambda o, lease: o.journal.put_meta({"runId": RUN, "status": "done"}, lease),
        _meta,
    ),
    _WriteOp(
        "delete", _one_entry, lambda o, lease: o.journal.delete(RUN, lease), _entries
    ),
    _WriteOp(
        "blob-put",
        _blob,
        lambda o, lease: o.transcripts.put(f"{RUN}/blob", b"after", lease),
        _blob_state,
    ),
    _WriteOp(
        "blob-delete",
        _blob,
        lambda o, lease: o.transcripts.delete(f"{RUN}/blob", lease),
        _blob_state,
    ),
    _WriteOp(
        "acquire",
        _nothing,
        lambda o, lease: _leasable(o).acquire(f"{RUN}-new", "owner-c"),
        _no_state,
        leases=True,
    ),
    _WriteOp(
        "renew",
        _nothing,
        lambda o, lease: _leasable(o).renew(_held(lease)),
        _no_state,
        leases=True,
    ),
    _WriteOp(
        "release",
        _nothing,
        lambda o, lease: _leasable(o).release(_held(lease)),
        _no_state,
        leases=True,
    ),
)


def _ttl_for(leasable: bool) -> int | None:
    return TTL_MS if leasable else None


def _held(lease: Lease | None) -> Lease:
    assert lease is not None  # lease ops run only on leasable stores
    return lease


class _Rig:
    """One fresh location, one async handle on it, the lease the setup took."""

    def __init__(self, location: StoreLocation, op: _WriteOp, leasable: bool) -> None:
        self.location = location
        # A store without leases takes no ttl (file:// refuses the option).
        self.ttl_ms = _ttl_for(leasable)
        self.loop = loop_thread()
        self.opened = self.loop.call(
            lambda: open_async_at(location.opener, self.ttl_ms, None, False)
        )
        self.lease = self.acquire(RUN, "owner-a")
        self.loop.call(lambda: op.setup(self.opened, self.lease))

    def acquire(self, run_id: str, owner: str) -> Lease | None:
        journal = self.opened.journal
        if not isinstance(journal, AsyncLeasableStore):
            return None
        return self.loop.call(lambda: journal.acquire(run_id, owner))

    def read(self, op: _WriteOp) -> object:
        with self.location.open(self.ttl_ms) as second:
            return op.read(second)

    def close(self) -> None:
        try:
            self.loop.call(self.opened.aclose)
        finally:
            self.location.remove()


def _reference(
    locations: LocationFactory, op: _WriteOp, leasable: bool
) -> tuple[object, object, list[Hit]]:
    """The states before and after an uncancelled write, and the failpoints it hits."""
    rig = _Rig(locations(), op, leasable)
    try:
        before = rig.read(op)
        seen: list[Hit] = []
        context = contextvars.copy_context()
        me = context.run(mark_caller)

        def record(operation: str, point: Any) -> None:
            if caller_identity() is me:
                seen.append((operation, point))

        with installed(record):
            context.run(
                rig.loop.start, lambda: op.write(rig.opened, rig.lease)
            ).future.result(PAUSE_LIMIT_S)
        return before, rig.read(op), seen
    finally:
        rig.close()


def _cancelled_everywhere(locations: LocationFactory, op: _WriteOp) -> None:
    """Cancel the write right after it starts, then at each failpoint it hits."""
    leasable = "leases" in _capabilities_of(locations)
    if op.leases and not leasable:
        not_run(f"the store grants no leases, so it has no {op.name}")
    before, after, hits = _reference(locations, op, leasable)
    for index in (None, *range(len(hits))):
        _cancelled_write(locations, op, index, (before, after), leasable)


def _cancelled_write(
    locations: LocationFactory,
    op: _WriteOp,
    index: int | None,
    states: tuple[object, object],
    leasable: bool,
) -> None:
    """Cancel the write at its ``index``-th failpoint (``None``: right after it starts)."""
    before, after = states
    rig = _Rig(locations(), op, leasable)
    pause = FailpointPause(index if index is not None else -1)
    try:
        context = contextvars.copy_context()
        context.run(pause.aim)
        with installed(pause.hook):
            started = context.run(
                rig.loop.start, lambda: op.write(rig.opened, rig.lease)
            )
            if index is not None:
                require(
                    pause.reached.wait(PAUSE_LIMIT_S),
                    f"{op.name} never reached {pause.where}",
                )
            started.cancel()
            for _ in range(LOOP_TURNS):
                rig.loop.call(partial(asyncio.sleep, 0))
            if index is not None:
                require(
                    not started.future.done(),
                    f"cancelled at {pause.where}, the caller was resumed while its "
                    "call was still inside the store (the call was split)",
                )
            pause.release()
            try:
                started.future.result(PAUSE_LIMIT_S)
                cancelled = False
            except concurrent.futures.CancelledError:
                cancelled = True
        where = pause.where if index is not None else "its start"
        require(
            cancelled or index is None,
            f"{op.name} cancelled at {where}: the caller did not get CancelledError",
        )
        state = rig.read(op)
        require(
            state in (before, after),
            f"{op.name} cancelled at {where}: a second handle reads {state!r}, "
            f"neither the state before ({before!r}) nor after ({after!r}) the write",
        )
        _second_handle_writes(rig.location, leasable, where, op)
        same_lease = rig.acquire(f"{RUN}-same", "owner-a")
        rig.loop.call(
            lambda: rig.opened.journal.append(f"{RUN}-same", {"seq": 1}, same_lease)
        )
    finally:
        # A failed require leaves the aimed caller paused: let it go before closing,
        # or it sits out PAUSE_LIMIT_S and holds the store's transaction open.
        pause.release()
        rig.close()


def _second_handle_writes(
    location: StoreLocation, leasable: bool, where: str, op: _WriteOp
) -> None:
    with location.open(_ttl_for(leasable), fail_fast=location.contention) as second:
        journal = second.journal
        lease = (
            journal.acquire(f"{RUN}-other", "owner-b")
            if isinstance(journal, LeasableStore)
            else None
        )
        try:
            journal.append(f"{RUN}-other", {"seq": 1}, lease)
        except Exception as exc:
            require(
                False,
                f"{op.name} cancelled at {where}: a second handle could not write "
                f"at once: {type(exc).__name__}: {exc}",
            )


_capability_cache: dict[int, frozenset[str]] = {}


def _capabilities_of(locations: LocationFactory) -> frozenset[str]:
    from rulvar_conformance.harness.certify import probe_capabilities

    key = id(locations)
    if key not in _capability_cache:
        _capability_cache[key] = probe_capabilities(locations)
    return _capability_cache[key]


def cancellation_conformance(certification: Certification) -> ConformanceSuite:
    """The cancellation suite over ``locations`` (each check opens its own)."""
    locations = certification.locations
    checks = [
        build_check(
            f"cancel-{op.name}",
            f"a caller cancelled inside {op.name}, at its start and at each failpoint: "
            "CancelledError once the call is over, all or nothing, nothing left locked",
            ("Y2", "Y3"),
            partial(_cancelled_everywhere, locations, op),
        )
        for op in OPERATIONS
    ]
    return ConformanceSuite("cancellation", tuple(checks))
