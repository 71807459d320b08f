"""The saver's store work as plans: generators that yield store calls, free of I/O.

A plan yields ``(target, method, args)`` and receives the call's result (or has
its exception thrown in); ``drive`` runs it over sync stores and ``adrive`` over
asyncio stores, so the sync and async savers share one implementation of every
operation and differ only in how a call is awaited.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar

from rulvar_langgraph._hold_cache import NO_CHECKPOINT, HoldCache
from rulvar_langgraph._layout import (
    META_NAME,
    META_TAG,
    CheckpointRecord,
    StoredWrite,
    checkpoint_prefix,
    checkpoint_ref,
    decode_checkpoint,
    decode_writes,
    encode_checkpoint,
    pointer_ref,
    split_ref,
    thread_for_run,
    writes_ref,
)
from rulvar_langgraph._pending import PendingWrites
from rulvar_store import Lease, LeaseHeldError, RulvarError, RunFilter, RunMeta

__all__ = [
    "Call",
    "Found",
    "Plan",
    "ThreadGoneError",
    "adrive",
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "drive",
    "get_tuple",
    "latest_id",
    "list_checkpoints",
    "prune",
    "put",
    "put_writes",
    "release",
]

T = TypeVar("T")
Target: TypeAlias = Literal["journal", "blobs"]
Call: TypeAlias = tuple[Target, str, tuple[Any, ...]]
Plan: TypeAlias = Generator[Call, Any, T]


def drive(plan: Plan[T], journal: Any, blobs: Any) -> T:
    """Run ``plan`` over sync stores; a store error is thrown back into the plan."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's declared return
        result, error = None, None
        target, method, args = call
        try:
            result = getattr(journal if target == "journal" else blobs, method)(*args)
        except Exception as exc:  # thrown into the plan, which re-raises or cleans up
            error = exc


async def adrive(plan: Plan[T], journal: Any, blobs: Any) -> T:
    """Run ``plan`` over asyncio stores (same SPI, ``async def``)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the plan's declared return
        result, error = None, None
        target, method, args = call
        try:
            result = await getattr(journal if target == "journal" else blobs, method)(
                *args
            )
        # CancelledError too: a brief lease taken by the plan is still released.
        except BaseException as exc:
            error = exc


class ThreadGoneError(LeaseHeldError):
    """An unheld put continues a checkpoint of a namespace that holds none (G13).

    The thread was deleted (or every checkpoint of the namespace dropped) after
    the writer read it: landing the put would restart the thread from a chain
    the store no longer has. A ``LeaseHeldError``, so the documented reaction
    holds (stop the invocation), but not retryable: the same put is refused
    every time.
    """

    retryable = False


def _leased(
    run_id: str, held: Lease | None, owner: str, body: Callable[[Lease], Plan[T]]
) -> Plan[T]:
    """Run ``body`` under the held lease, or under a brief one taken for this call.

    The brief lease makes a write outside a hold refused while another worker
    holds the thread (acquire raises ``LeaseHeldError``). A held lease is never
    replaced: after a refusal the caller sees the error, not a silent re-acquire.
    """
    if held is not None:
        return (yield from body(held))
    lease: Lease = yield ("journal", "acquire", (run_id, owner))
    try:
        return (yield from body(lease))
    finally:
        # Deleting the run drops its lease row, and an expired brief lease has
        # nothing left to give back; the write's outcome stands either way.
        with suppress(RulvarError):
            yield ("journal", "release", (lease,))


def release(lease: Lease) -> Plan[None]:
    """Give a hold's lease back; one that was superseded or deleted is already gone."""
    with suppress(LeaseHeldError):
        yield ("journal", "release", (lease,))


def thread_meta(run_id: str) -> RunMeta:
    """The run meta that makes a thread an ordinary run for ``rulvar runs``."""
    return {
        "runId": run_id,
        "status": "suspended",
        "name": META_NAME,
        "tags": [META_TAG],
        "threadId": thread_for_run(run_id),
        "updatedAt": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }


def _ensure_meta(run_id: str, lease: Lease) -> Plan[None]:
    meta = yield ("journal", "get_meta", (run_id,))
    if meta is None:
        yield ("journal", "put_meta", (thread_meta(run_id), lease))


def latest_id(run_id: str, checkpoint_ns: str, indexed: bool) -> Plan[str | None]:
    """The id of the namespace's newest checkpoint, or ``None``: ONE read.

    Checkpoint ids grow with time as strings (uuid6), so the newest is the
    greatest ref under the namespace's checkpoint prefix: ``last_ref`` (T12)
    where the blob store has it, else the greatest of the thread's listing
    (still one read, but as long as the thread).
    """
    prefix = checkpoint_prefix(run_id, checkpoint_ns)
    if indexed:
        ref: str | None = yield ("blobs", "last_ref", (run_id, prefix))
    else:
        refs: list[str] = yield ("blobs", "list_refs", (run_id,))
        ref = max((r for r in refs if r.startswith(prefix)), default=None)
    return None if ref is None else ref[len(prefix) :]


def put(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    record: CheckpointRecord,
    held: Lease | None,
    owner: str,
    cache: HoldCache | None = None,
    indexed: bool = False,
) -> Plan[None]:
    """Store one checkpoint: one fenced ``put``; nothing else names the newest.

    The namespace's newest checkpoint is its greatest id (``latest_id``), so
    no pointer blob is written. The put still learns whether the namespace had
    a checkpoint: a hold's ``cache`` knows after its first put or read of a
    namespace (then a held put is ONE write, no read); otherwise one
    ``latest_id`` read. An unheld put that names a parent in a namespace
    without a checkpoint is a late write into a deleted thread and is refused
    (G13); under a hold the fence already refuses a pre-delete lease (G5).
    """
    blob = encode_checkpoint(record)

    def body(lease: Lease) -> Plan[None]:
        known = None if cache is None else cache.latest.pop(checkpoint_ns, None)
        if known is None:
            current = yield from latest_id(run_id, checkpoint_ns, indexed)
        else:
            current = known or None  # NO_CHECKPOINT: the hold saw the namespace empty
        if current is None and held is None and record.parent_id is not None:
            raise ThreadGoneError(
                f"thread {thread_for_run(run_id)!r} has no checkpoint in namespace "
                f"{checkpoint_ns!r} for this put to continue (parent "
                f"{record.parent_id!r}): it was deleted; start it afresh without "
                "a checkpoint_id, or hold it",
                run_id,
            )
        ref = checkpoint_ref(run_id, checkpoint_ns, checkpoint_id)
        yield ("blobs", "put", (ref, blob, lease))
        newest = current is None or checkpoint_id > current
        if cache is not None:
            cache.latest[checkpoint_ns] = checkpoint_id if newest else current or ""
            if newest:
                cache.new_checkpoint(checkpoint_ns, checkpoint_id)
        if current is None:
            yield from _ensure_meta(run_id, lease)

    return (yield from _leased(run_id, held, owner, body))


def put_writes(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    new: Sequence[StoredWrite],
    held: Lease | None,
    owner: str,
    cache: HoldCache | None = None,
) -> Plan[None]:
    """Merge ``new`` into the checkpoint's writes blob; always a fenced write.

    Callers serialize this read-modify-write per thread inside one saver; across
    savers the lease does, since only its holder can write. A hold's ``cache``
    keeps the namespace's latest merged writes, so repeated writes to one
    checkpoint read nothing.
    """
    ref = writes_ref(run_id, checkpoint_ns, checkpoint_id)

    def body(lease: Lease) -> Plan[None]:
        known = None if cache is None else cache.writes.pop(checkpoint_ns, None)
        if known is not None and known[0] == checkpoint_id:
            pending = known[1]
        else:
            blob: bytes | None = yield ("blobs", "get", (ref,))
            pending = PendingWrites.decoded(blob)
        pending.merge(new)
        yield ("blobs", "put", (ref, pending.blob(), lease))
        if cache is not None:
            cache.writes[checkpoint_ns] = (checkpoint_id, pending)

    return (yield from _leased(run_id, held, owner, body))


@dataclass(frozen=True, slots=True)
class Found:
    """One checkpoint read back, still serialized."""

    run_id: str
    checkpoint_ns: str
    checkpoint_id: str
    record: CheckpointRecord
    writes: list[StoredWrite]


def _read(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    remembered: PendingWrites | None = None,
) -> Plan[Found | None]:
    blob = yield (
        "blobs",
        "get",
        (checkpoint_ref(run_id, checkpoint_ns, checkpoint_id),),
    )
    if blob is None:
        return None
    if remembered is not None:
        writes = list(remembered.writes)
    else:
        stored = yield (
            "blobs",
            "get",
            (writes_ref(run_id, checkpoint_ns, checkpoint_id),),
        )
        writes = decode_writes(stored)
    return Found(
        run_id,
        checkpoint_ns,
        checkpoint_id,
        decode_checkpoint(blob),
        writes,
    )


def get_tuple(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    cache: HoldCache | None = None,
    indexed: bool = False,
) -> Plan[Found | None]:
    """Read one checkpoint; without an id, the newest (``latest_id``: three reads).

    Under a hold (``cache``, run inside the thread's lock) the hold's memory
    answers what it knows, and what this read learns of the latest checkpoint
    is remembered, so the invocation's first put and put_writes read nothing.
    """
    latest = checkpoint_id is None
    if checkpoint_id is None:
        known = None if cache is None else cache.latest.get(checkpoint_ns)
        if known is None:
            newest = yield from latest_id(run_id, checkpoint_ns, indexed)
            known = NO_CHECKPOINT if newest is None else newest
            if cache is not None:
                cache.latest[checkpoint_ns] = known
        if known == NO_CHECKPOINT:
            return None
        checkpoint_id = known
    remembered = (
        None if cache is None else cache.known_writes(checkpoint_ns, checkpoint_id)
    )
    found = yield from _read(run_id, checkpoint_ns, checkpoint_id, remembered)
    if found is not None and cache is not None and latest and remembered is None:
        cache.writes[checkpoint_ns] = (checkpoint_id, PendingWrites.of(found.writes))
    return found


@dataclass(frozen=True, slots=True)
class _Inventory:
    """What one run's refs say: checkpoint ids per namespace, and the namespaces
    with a pointer blob left by an earlier version (ignored on read)."""

    checkpoints: dict[str, set[str]]
    writes: dict[str, set[str]]
    pointers: set[str]


def _inventory(refs: Iterable[str]) -> _Inventory:
    inventory = _Inventory({}, {}, set())
    for ref in refs:
        parts = split_ref(ref)
        if parts is None:
            continue
        kind, checkpoint_ns, checkpoint_id = parts
        if kind == "c":
            inventory.checkpoints.setdefault(checkpoint_ns, set()).add(checkpoint_id)
        elif kind == "w":
            inventory.writes.setdefault(checkpoint_ns, set()).add(checkpoint_id)
        else:
            inventory.pointers.add(checkpoint_ns)
    return inventory


def _thread_runs(run_id: str | None) -> Plan[list[str]]:
    if run_id is not None:
        return [run_id]
    metas: list[RunMeta] = yield ("journal", "list_runs", (RunFilter(tags=[META_TAG]),))
    return sorted(str(meta["runId"]) for meta in metas)


def list_checkpoints(
    run_id: str | None,
    checkpoint_ns: str | None,
    checkpoint_id: str | None,
    before_id: str | None,
    keep: Callable[[CheckpointRecord], bool],
    limit: int | None,
) -> Plan[list[Found]]:
    """Checkpoints newest first per namespace, filtered by id, cursor and ``keep``."""
    found: list[Found] = []
    for run in (yield from _thread_runs(run_id)):
        inventory = _inventory((yield ("blobs", "list_refs", (run,))))
        for ns in sorted(inventory.checkpoints):
            if checkpoint_ns is not None and ns != checkpoint_ns:
                continue
            for cid in sorted(inventory.checkpoints[ns], reverse=True):
                if checkpoint_id is not None and cid != checkpoint_id:
                    continue
                if before_id is not None and cid >= before_id:
                    continue
                if limit is not None and len(found) >= limit:
                    return found
                item = yield from _read(run, ns, cid)
                if item is not None and keep(item.record):
                    found.append(item)
    return found


def _delete_refs(refs: Iterable[str], lease: Lease) -> Plan[None]:
    for ref in refs:
        yield ("blobs", "delete", (ref, lease))


def delete_thread(run_id: str, held: Lease | None, owner: str) -> Plan[None]:
    """Delete every blob of the thread (old pointers too), then its run; the epoch stays (L5)."""

    def body(lease: Lease) -> Plan[None]:
        refs = yield ("blobs", "list_refs", (run_id,))
        yield from _delete_refs(sorted(refs), lease)
        yield ("journal", "delete", (run_id, lease))

    return (yield from _leased(run_id, held, owner, body))


def _drop(
    run_id: str,
    inventory: _Inventory,
    doomed: dict[str, set[str]],
    lease: Lease,
) -> Plan[None]:
    """Delete the doomed checkpoints and their writes (and a touched namespace's old pointer)."""
    for ns, ids in doomed.items():
        if not ids:
            continue
        if ns in inventory.pointers:
            yield ("blobs", "delete", (pointer_ref(run_id, ns), lease))
        for cid in sorted(ids):
            yield ("blobs", "delete", (checkpoint_ref(run_id, ns, cid), lease))
            if cid in inventory.writes.get(ns, set()):
                yield ("blobs", "delete", (writes_ref(run_id, ns, cid), lease))


def prune(run_id: str, strategy: str, held: Lease | None, owner: str) -> Plan[None]:
    """Keep only each namespace's newest checkpoint, or delete the thread."""
    if strategy == "delete":
        return (yield from delete_thread(run_id, held, owner))

    def body(lease: Lease) -> Plan[None]:
        inventory = _inventory((yield ("blobs", "list_refs", (run_id,))))
        doomed = {
            ns: ids - {max(ids)} for ns, ids in inventory.checkpoints.items() if ids
        }
        # Writes stored against a checkpoint that no longer exists go too.
        orphans = {
            ns: ids - inventory.checkpoints.get(ns, set())
            for ns, ids in inventory.writes.items()
        }
        yield from _drop(run_id, inventory, doomed, lease)
        for ns, ids in orphans.items():
            for cid in sorted(ids):
                yield ("blobs", "delete", (writes_ref(run_id, ns, cid), lease))

    return (yield from _leased(run_id, held, owner, body))


def delete_for_runs(
    run_ids: Sequence[str],
    metadata_run_id: Callable[[CheckpointRecord], object],
    holding: Callable[[str], Lease | None],
    owner: str,
) -> Plan[None]:
    """Delete, in every thread, the checkpoints (and writes) whose metadata names a run."""
    wanted = set(run_ids)
    if not wanted:
        return
    for run in (yield from _thread_runs(None)):
        inventory = _inventory((yield ("blobs", "list_refs", (run,))))
        doomed: dict[str, set[str]] = {}
        for ns, ids in inventory.checkpoints.items():
            for cid in ids:
                blob = yield ("blobs", "get", (checkpoint_ref(run, ns, cid),))
                if (
                    blob is not None
                    and metadata_run_id(decode_checkpoint(blob)) in wanted
                ):
                    doomed.setdefault(ns, set()).add(cid)
        if doomed:
            yield from _leased(
                run,
                holding(run),
                owner,
                partial(_drop, run, inventory, doomed),
            )


def copy_thread(
    source_run: str, target_run: str, held: Lease | None, owner: str
) -> Plan[None]:
    """Copy every checkpoint and writes blob under a lease on the target (no old pointer)."""

    def body(lease: Lease) -> Plan[None]:
        refs: list[str] = yield ("blobs", "list_refs", (source_run,))
        for ref in refs:
            parts = split_ref(ref)
            if parts is None or parts[0] == "p":
                continue
            blob = yield ("blobs", "get", (ref,))
            if blob is not None:
                target = target_run + ref[len(source_run) :]
                yield ("blobs", "put", (target, blob, lease))
        if refs:
            yield from _ensure_meta(target_run, lease)

    return (yield from _leased(target_run, held, owner, body))
