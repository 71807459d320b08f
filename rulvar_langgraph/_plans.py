"""The saver's store work as plans: generators that yield store calls, free of I/O.

A plan yields ``(target, method, args)`` and receives the call's result (or has
its exception thrown in); ``drive`` runs it over sync stores and ``adrive`` over
asyncio stores, so the sync and async savers share one implementation of every
operation and differ only in how a call is awaited.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, Literal, TypeAlias, TypeVar

from rulvar_langgraph._hold_cache import NO_CHECKPOINT, HoldCache, TaskWrites
from rulvar_langgraph._layout import (
    CHECKPOINT_LEAF,
    META_NAME,
    META_TAG,
    CheckpointRecord,
    StoredWrite,
    checkpoint_base,
    checkpoint_prefix,
    checkpoint_ref,
    decode_checkpoint,
    decode_writes,
    encode_checkpoint,
    old_checkpoint_ref,
    pointer_ref,
    split_ref,
    task_writes_ref,
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
    "acquire_hold",
    "adrive",
    "copy_thread",
    "delete_for_run",
    "delete_thread",
    "drive",
    "ended",
    "get_tuple",
    "latest_id",
    "list_checkpoints",
    "prune",
    "put",
    "put_writes",
    "release",
    "thread_runs",
]

T = TypeVar("T")
Target: TypeAlias = Literal["journal", "blobs", "brief"]
Call: TypeAlias = tuple[Target, str, tuple[Any, ...]]
Plan: TypeAlias = Generator[Call, Any, T]


def _in_one_transaction(journal: Any, blobs: Any) -> bool:
    """Whether the journal runs a brief lease's work in one transaction over ``blobs``.

    Only over its own blob twin: the work's blob calls go through the journal.
    """
    twin = getattr(journal, "transcripts", None)
    return callable(getattr(journal, "in_brief_lease", None)) and (
        callable(twin) and twin() is blobs
    )


def _inside(body: Callable[[Lease], Plan[T]]) -> Callable[[Lease, Any, Any], T]:
    """The brief lease's work: ``body`` driven over the transaction's own view."""
    return lambda lease, journal, blobs: drive(body(lease), journal, blobs)


async def _adriven(
    body: Callable[[Lease], Plan[T]], lease: Lease, journal: Any, blobs: Any
) -> T:
    return await adrive(body(lease), journal, blobs)


def _ainside(body: Callable[[Lease], Plan[T]]) -> Callable[[Lease, Any, Any], Any]:
    """The brief lease's work for a store that awaits it over awaited views."""
    return partial(_adriven, body)


# The writes a store runs through its one write door, behind any write queued
# before them (``queue_put``): they need not wait for a queued write to land.
# Every other call may read, and a reader must see the queued writes.
ORDERED_WRITES: Final = frozenset(
    {
        "acquire",
        "append",
        "delete",
        "put",
        "put_many",
        "put_meta",
        "put_meta_and_release",
        "put_with_meta",
        "queue_put",
        "release",
    }
)


def drive(
    plan: Plan[T],
    journal: Any,
    blobs: Any,
    before_read: Callable[[], None] | None = None,
) -> T:
    """Run ``plan`` over sync stores; a store error is thrown back into the plan.

    ``before_read`` runs before each call that may read (not in
    ``ORDERED_WRITES``, a brief lease in one transaction aside): the sync
    saver lands its queued writes there.
    """
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
            if target == "brief":
                run_id, owner, body = args
                if _in_one_transaction(journal, blobs):
                    result = journal.in_brief_lease(
                        run_id,
                        owner,
                        _inside(body),
                    )
                else:
                    calls = _brief_calls(run_id, owner, body)
                    result = drive(calls, journal, blobs, before_read)
            else:
                if before_read is not None and method not in ORDERED_WRITES:
                    before_read()
                store = journal if target == "journal" else blobs
                result = getattr(store, method)(*args)
        except Exception as exc:  # thrown into the plan, which re-raises or cleans up
            error = exc


async def adrive(
    plan: Plan[T],
    journal: Any,
    blobs: Any,
    before_read: Callable[[], Awaitable[None]] | None = None,
) -> T:
    """Run ``plan`` over asyncio stores (same SPI, ``async def``); ``before_read`` as ``drive``'s."""
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
            if target == "brief":
                run_id, owner, body = args
                if _in_one_transaction(journal, blobs):
                    # A store whose transaction is awaited (PostgreSQL) awaits
                    # the work over awaited views; SQLite's runs it synchronously
                    # on its writer thread, over sync views.
                    awaited = getattr(journal, "brief_work_awaited", False) is True
                    work = _ainside(body) if awaited else _inside(body)
                    result = await journal.in_brief_lease(run_id, owner, work)
                else:
                    plan_of = _brief_calls(run_id, owner, body)
                    result = await adrive(plan_of, journal, blobs, before_read)
            else:
                if before_read is not None and method not in ORDERED_WRITES:
                    await before_read()
                store = journal if target == "journal" else blobs
                result = await getattr(store, method)(*args)
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
    # The driver runs the body in ONE transaction where the store offers it
    # (``in_brief_lease``), else as ``_brief_calls``.
    result: T = yield ("brief", "lease", (run_id, owner, body))
    return result


def _brief_calls(run_id: str, owner: str, body: Callable[[Lease], Plan[T]]) -> Plan[T]:
    """The brief lease as three calls: acquire, the body, release."""
    lease: Lease = yield ("journal", "acquire", (run_id, owner))
    try:
        return (yield from body(lease))
    finally:
        # Deleting the run drops its lease row, and an expired brief lease has
        # nothing left to give back; the write's outcome stands either way.
        with suppress(RulvarError):
            yield ("journal", "release", (lease,))


def acquire_hold(
    run_id: str, owner: str, prefetch: bool = False
) -> Plan[tuple[Lease, str | None]]:
    """A hold's acquire; with ``prefetch`` also its root namespace's newest checkpoint.

    ``prefetch``: the journal's ``acquire_with_last_ref`` (one round trip on
    PostgreSQL). The second value is what the hold then knows of the root
    namespace's newest checkpoint (its id, or ``NO_CHECKPOINT``), or ``None``:
    not known (no prefetch, or a greatest ref that is no checkpoint's, which
    the first read then lists as ``_latest`` does).
    """
    if not prefetch:
        lease: Lease = yield ("journal", "acquire", (run_id, owner))
        return lease, None
    prefix = checkpoint_prefix(run_id, "")
    lease, ref = yield ("journal", "acquire_with_last_ref", (run_id, owner, prefix))
    if ref is None:
        return lease, NO_CHECKPOINT
    parts = split_ref(ref)
    if parts is not None and parts[0] in ("c", "oc"):
        return lease, parts[2]
    return lease, None


def release(lease: Lease) -> Plan[None]:
    """Give a hold's lease back; one that was superseded or deleted is already gone."""
    with suppress(LeaseHeldError):
        yield ("journal", "release", (lease,))


def ended(
    lease: Lease,
    outcome: dict[str, Any] | None,
    fused: bool = False,
    known: RunMeta | None = None,
) -> Plan[None]:
    """End a hold: write its ``outcome`` into the thread's meta, then release.

    ``outcome`` (``threadStatus``, ``status``, ``checkpointId``, maybe ``error``)
    is ``None`` when the hold wrote nothing to the root namespace: the meta
    stays as it was. The meta is read first so keys others wrote survive. A
    refused or failed status write leaves the earlier status, which the
    listing then shows as ``incomplete`` (its ``checkpointId`` is older than
    the newest checkpoint): the write is best effort, the release is not.
    With ``fused`` (the store's ``put_meta_and_release``) the write and the
    release are one transaction. ``known`` is the meta the hold itself wrote
    (it started the thread): merged into without reading it back.
    """
    released = False
    try:
        if outcome is not None:
            with suppress(RulvarError):
                meta = known
                if meta is None:
                    meta = yield ("journal", "get_meta", (lease.run_id,))
                base = (
                    dict(meta) if isinstance(meta, dict) else thread_meta(lease.run_id)
                )
                base.pop("error", None)
                written = {**base, **outcome, "updatedAt": _now()}
                if fused:
                    yield ("journal", "put_meta_and_release", (written, lease))
                    released = True
                else:
                    yield ("journal", "put_meta", (written, lease))
    finally:
        if not released:
            yield from release(lease)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def thread_meta(run_id: str) -> RunMeta:
    """The run meta that makes a thread an ordinary run for ``rulvar runs``.

    ``running`` until a hold ends and says how (``ended``); the listing tells a
    live holder from a dead one by the lease row, not by this status.
    """
    return {
        "runId": run_id,
        "status": "running",
        "name": META_NAME,
        "tags": [META_TAG],
        "threadId": thread_for_run(run_id),
        "updatedAt": _now(),
    }


def _ensure_meta(run_id: str, lease: Lease) -> Plan[None]:
    meta = yield ("journal", "get_meta", (run_id,))
    if meta is None:
        yield ("journal", "put_meta", (thread_meta(run_id), lease))


def _newest_listed(refs: Iterable[str], prefix: str) -> str | None:
    """The greatest checkpoint id among listed refs under a namespace's prefix."""
    ids = (
        parts[2]
        for ref in refs
        if ref.startswith(prefix)
        and (parts := split_ref(ref)) is not None
        and parts[0] in ("c", "oc")
    )
    return max(ids, default=None)


def _ids_above(refs: Iterable[str], prefix: str, newest: str | None) -> set[str]:
    """The ids with refs under the namespace's prefix above its newest checkpoint:
    writes stored before (or without) their checkpoint."""
    return {
        parts[2]
        for ref in refs
        if ref.startswith(prefix)
        and (parts := split_ref(ref)) is not None
        and (newest is None or parts[2] > newest)
    }


def latest_id(
    run_id: str, checkpoint_ns: str, indexed: bool, cache: HoldCache | None = None
) -> Plan[str | None]:
    """The id of the namespace's newest checkpoint, or ``None`` (``_latest``)."""
    newest, _ = yield from _latest(run_id, checkpoint_ns, indexed, cache)
    return newest


def _latest(
    run_id: str, checkpoint_ns: str, indexed: bool, cache: HoldCache | None = None
) -> Plan[tuple[str | None, list[str] | None]]:
    """The id of the namespace's newest checkpoint, or ``None``: ONE read.

    Checkpoint ids grow with time as strings (uuid6), and a checkpoint's own
    blob is the greatest of its refs (``_layout``), so the newest checkpoint
    owns the greatest ref under the namespace's prefix: ``last_ref`` (T12)
    where the blob store has it, else the greatest of the thread's listing
    (still one read, but as long as the thread). A greatest ref that is not a
    checkpoint's (writes stored against an id with no checkpoint, or an
    earlier version's checkpoint with writes of this one) costs one listing.
    Returns the listing too, when one was read.

    A hold's ``cache`` notes the ids a listing shows writes under above the
    newest checkpoint (a greatest ref that is a checkpoint's says there are none):
    a checkpoint the hold later creates with such an id is not assumed empty.
    """
    prefix = checkpoint_prefix(run_id, checkpoint_ns)
    if indexed:
        ref: str | None = yield ("blobs", "last_ref", (run_id, prefix))
        if ref is None:
            return None, None
        parts = split_ref(ref)
        if parts is not None and parts[0] in ("c", "oc"):
            return parts[2], None
    refs: list[str] = yield ("blobs", "list_refs", (run_id,))
    newest = _newest_listed(refs, prefix)
    if cache is not None:
        cache.listed(checkpoint_ns, _ids_above(refs, prefix, newest))
    return newest, refs


# A checkpoint's ref past its namespace's prefix (``split_ref``): its id, then
# the leaf, or the id alone (the older layout); never a write's ref.
CHECKPOINT_TAIL: Final = f"^[^/]+(/{CHECKPOINT_LEAF})?$"


def _gone(run_id: str, checkpoint_ns: str, parent_id: str | None) -> ThreadGoneError:
    return ThreadGoneError(
        f"thread {thread_for_run(run_id)!r} has no checkpoint in namespace "
        f"{checkpoint_ns!r} for this put to continue (parent "
        f"{parent_id!r}): it was deleted; start it afresh without "
        "a checkpoint_id, or hold it",
        run_id,
    )


def put(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    record: CheckpointRecord,
    held: Lease | None,
    owner: str,
    cache: HoldCache | None = None,
    indexed: bool = False,
    fused: bool = False,
    brief_put: bool = False,
) -> Plan[None]:
    """Store one checkpoint: one fenced ``put``; nothing else names the newest.

    The namespace's newest checkpoint is its greatest id (``latest_id``), so
    no pointer blob is written. The put still learns whether the namespace had
    a checkpoint: a hold's ``cache`` knows after its first put or read of a
    namespace (then a held put is ONE write, no read); otherwise one
    ``latest_id`` read. An unheld put that names a parent in a namespace
    without a checkpoint is a late write into a deleted thread and is refused
    (G13); under a hold the fence already refuses a pre-delete lease (G5).
    With ``brief_put`` (the journal's ``brief_put``, L16) an unheld put is
    all of that in one store call: the read, the G13 refusal and the
    starting thread's meta happen inside it.
    """
    blob = encode_checkpoint(record)
    if held is None and brief_put:
        # ONE store call: the brief lease, the put, a starting thread's meta.
        # A put that names a parent needs a prior checkpoint, and one found
        # means the thread started before: its meta would never be written.
        continues = record.parent_id is not None
        written = yield (
            "journal",
            "brief_put",
            (
                owner,
                checkpoint_ref(run_id, checkpoint_ns, checkpoint_id),
                blob,
                checkpoint_prefix(run_id, checkpoint_ns),
                CHECKPOINT_TAIL,
                None if continues else thread_meta(run_id),
                checkpoint_ns == "",  # the root namespace's meta is the saver's own
                continues,
            ),
        )
        if not written:
            raise _gone(run_id, checkpoint_ns, record.parent_id)
        return

    def body(lease: Lease) -> Plan[None]:
        known = None if cache is None else cache.latest.pop(checkpoint_ns, None)
        if known is None:
            current = yield from latest_id(run_id, checkpoint_ns, indexed, cache)
        else:
            current = known or None  # NO_CHECKPOINT: the hold saw the namespace empty
        if current is None and held is None and record.parent_id is not None:
            raise _gone(run_id, checkpoint_ns, record.parent_id)
        ref = checkpoint_ref(run_id, checkpoint_ns, checkpoint_id)
        starts = current is None and checkpoint_ns == ""  # the root graph's namespace
        meta = thread_meta(run_id) if starts else None
        if cache is not None and meta is not None:
            cache.meta = None  # set again once the meta is surely written
        if meta is not None and fused:
            # The thread starts: its checkpoint and its meta in one transaction.
            yield ("journal", "put_with_meta", (ref, blob, meta, lease))
        else:
            yield ("blobs", "put", (ref, blob, lease))
        newest = current is None or checkpoint_id > current
        if cache is not None:
            cache.latest[checkpoint_ns] = checkpoint_id if newest else current or ""
            if newest:
                cache.new_checkpoint(checkpoint_ns, checkpoint_id)
        if current is None:
            if checkpoint_ns == "":  # the root graph's namespace
                # The root namespace empty: the thread starts (or starts over
                # after losing every root checkpoint). Its meta holds nothing
                # but the saver's own fields, so it is written, not read first.
                if not fused:
                    yield ("journal", "put_meta", (meta, lease))
                if cache is not None:
                    # The hold's end merges into this, without a read: under
                    # the hold only its holder writes with the lease.
                    cache.meta = meta
            else:
                yield from _ensure_meta(run_id, lease)

    return (yield from _leased(run_id, held, owner, body))


def _by_task(writes: Iterable[StoredWrite]) -> TaskWrites:
    tasks: TaskWrites = {}
    for write in writes:
        tasks.setdefault(write.task_id, PendingWrites()).merge([write])
    return tasks


def put_writes(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    new: Sequence[StoredWrite],
    held: Lease | None,
    owner: str,
    cache: HoldCache | None = None,
    whole: bool = False,
    queue: bool = False,
) -> Plan[Any]:
    """Merge ``new`` into the task's writes blob on the checkpoint; one fenced write.

    Only this task's blob is written, so the cost stays flat however many
    tasks wrote before. Callers serialize this read-modify-write per thread
    inside one saver; across savers the lease does, since only its holder can
    write. A hold's ``cache`` keeps every write of the namespace's latest
    checkpoint by task, so writes to it read nothing; a hold that does not
    know the checkpoint reads all its writes once (``get_under``, T13, where
    the store has it), outside a hold the task's own blob is read.

    ``queue`` (a hold's write, over a store with ``queue_put``): the write is
    queued to share the COMMIT of the write that follows it (the step's
    checkpoint), and the plan returns the queued put for the caller to await
    once it let go of the thread's lock; the hold's memory counts it landed
    already, and the caller clears that memory if it then fails. Otherwise
    the plan returns ``None`` once the write landed.
    """
    ref = task_writes_ref(run_id, checkpoint_ns, checkpoint_id, task_id)

    def body(lease: Lease) -> Plan[Any]:
        known = None if cache is None else cache.writes.pop(checkpoint_ns, None)
        tasks: TaskWrites | None = None
        if known is not None and known[0] == checkpoint_id:
            tasks = known[1]
        elif cache is not None and whole:
            base = checkpoint_base(run_id, checkpoint_ns, checkpoint_id)
            stored = yield ("blobs", "get_under", (run_id, base + "/w/"))
            tasks = _by_task(w for _, blob in stored for w in decode_writes(blob))
        if tasks is not None:
            pending = tasks.setdefault(task_id, PendingWrites())
        else:
            blob: bytes | None = yield ("blobs", "get", (ref,))
            pending = PendingWrites.decoded(blob)
        pending.merge(new)
        if cache is not None:
            # Before the write: a write of unknown outcome may have landed.
            cache.writing(checkpoint_ns, checkpoint_id)
        queued = held is not None and cache is not None and queue and cache.queue_writes
        queued_put = yield (
            "blobs",
            "queue_put" if queued else "put",
            (ref, pending.blob(), lease),
        )
        if cache is not None and tasks is not None:
            cache.writes[checkpoint_ns] = (checkpoint_id, tasks)
        return queued_put if queued else None

    return (yield from _leased(run_id, held, owner, body))


@dataclass(frozen=True, slots=True)
class Found:
    """One checkpoint read back, still serialized."""

    run_id: str
    checkpoint_ns: str
    checkpoint_id: str
    record: CheckpointRecord
    writes: list[StoredWrite]


def _own(pairs: Iterable[tuple[str, bytes]], base: str) -> dict[str, bytes]:
    """The pairs that belong to the checkpoint at ``base``: the base or under its '/'."""
    under = base + "/"
    return {ref: blob for ref, blob in pairs if ref == base or ref.startswith(under)}


def _read(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    remembered: TaskWrites | None = None,
    *,
    whole: bool,
    listed: Sequence[str] | None = None,
) -> Plan[Found | None]:
    """Read one checkpoint and its writes.

    With ``get_under`` (``whole``) one read brings the checkpoint and every
    task's writes; with the writes ``remembered`` by a hold, one ``get`` of the
    checkpoint. Otherwise the checkpoint is a ``get`` and its writes are found
    in the thread's listing (``listed``: the id's refs, when the caller has
    them). A
    checkpoint an earlier version stored also has its one writes blob read,
    merged before this version's (regular writes keep the first stored).
    """
    base = checkpoint_base(run_id, checkpoint_ns, checkpoint_id)
    own: dict[str, bytes]
    if remembered is not None:
        blob = yield (
            "blobs",
            "get",
            (checkpoint_ref(run_id, checkpoint_ns, checkpoint_id),),
        )
        if blob is not None:
            writes = [w for pending in remembered.values() for w in pending.writes]
            return Found(
                run_id, checkpoint_ns, checkpoint_id, decode_checkpoint(blob), writes
            )
    if whole:
        own = _own((yield ("blobs", "get_under", (run_id, base))), base)
    else:
        if listed is None:
            listed = yield ("blobs", "list_refs", (run_id,))
        own = {}
        for ref in _own(((ref, b"") for ref in listed), base):
            got: bytes | None = yield ("blobs", "get", (ref,))
            if got is not None:
                own[ref] = got
    record = own.get(checkpoint_ref(run_id, checkpoint_ns, checkpoint_id))
    pending = PendingWrites()
    if record is None:
        record = own.get(base)  # an earlier version's checkpoint
        if record is None:
            return None
        old = yield (
            "blobs",
            "get",
            (writes_ref(run_id, checkpoint_ns, checkpoint_id),),
        )
        pending.merge(decode_writes(old))
    for ref in sorted(own):
        if ref.startswith(base + "/w/"):
            pending.merge(decode_writes(own[ref]))
    return Found(
        run_id,
        checkpoint_ns,
        checkpoint_id,
        decode_checkpoint(record),
        list(pending.writes),
    )


def get_tuple(
    run_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    cache: HoldCache | None = None,
    indexed: bool = False,
    whole: bool = False,
) -> Plan[Found | None]:
    """Read one checkpoint; without an id, the newest (``latest_id``: two reads).

    Under a hold (``cache``, run inside the thread's lock) the hold's memory
    answers what it knows, and what this read learns of the latest checkpoint
    is remembered, so the invocation's first put and put_writes read nothing.
    """
    latest = checkpoint_id is None
    listed: list[str] | None = None
    if checkpoint_id is None:
        known = None if cache is None else cache.latest.get(checkpoint_ns)
        if known is None:
            newest, listed = yield from _latest(run_id, checkpoint_ns, indexed, cache)
            known = NO_CHECKPOINT if newest is None else newest
            if cache is not None:
                cache.latest[checkpoint_ns] = known
        if known == NO_CHECKPOINT:
            return None
        checkpoint_id = known
    remembered = (
        None if cache is None else cache.known_writes(checkpoint_ns, checkpoint_id)
    )
    found = yield from _read(
        run_id, checkpoint_ns, checkpoint_id, remembered, whole=whole, listed=listed
    )
    if found is not None and cache is not None and latest and remembered is None:
        cache.writes[checkpoint_ns] = (checkpoint_id, _by_task(found.writes))
    return found


@dataclass(frozen=True, slots=True)
class _Inventory:
    """What one run's refs say: per namespace, each checkpoint id's refs (its
    checkpoint, its writes, an earlier version's writes blob) and which ids
    have a checkpoint; the namespaces with an earlier version's pointer."""

    checkpoints: dict[str, set[str]]
    refs: dict[str, dict[str, list[str]]]
    pointers: set[str]


def _inventory(refs: Iterable[str]) -> _Inventory:
    inventory = _Inventory({}, {}, set())
    for ref in refs:
        parts = split_ref(ref)
        if parts is None:
            continue
        kind, checkpoint_ns, checkpoint_id = parts
        if kind == "p":
            inventory.pointers.add(checkpoint_ns)
            continue
        by_id = inventory.refs.setdefault(checkpoint_ns, {})
        by_id.setdefault(checkpoint_id, []).append(ref)
        if kind in ("c", "oc"):
            inventory.checkpoints.setdefault(checkpoint_ns, set()).add(checkpoint_id)
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
    whole: bool = False,
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
                item = yield from _read(
                    run, ns, cid, whole=whole, listed=inventory.refs[ns][cid]
                )
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
    """Delete every ref of the doomed checkpoint ids (and a touched namespace's old pointer)."""
    for ns, ids in doomed.items():
        if not ids:
            continue
        if ns in inventory.pointers:
            yield ("blobs", "delete", (pointer_ref(run_id, ns), lease))
        refs = inventory.refs.get(ns, {})
        yield from _delete_refs(
            sorted(r for cid in ids for r in refs.get(cid, [])), lease
        )


def prune(run_id: str, strategy: str, held: Lease | None, owner: str) -> Plan[None]:
    """Keep only each namespace's newest checkpoint, or delete the thread."""
    if strategy == "delete":
        return (yield from delete_thread(run_id, held, owner))

    def body(lease: Lease) -> Plan[None]:
        inventory = _inventory((yield ("blobs", "list_refs", (run_id,))))
        doomed: dict[str, set[str]] = {}
        for ns, by_id in inventory.refs.items():
            ids = inventory.checkpoints.get(ns, set())
            newest = max(ids, default=None)
            # Writes stored against a checkpoint that no longer exists go too.
            doomed[ns] = {cid for cid in by_id if cid != newest}
        yield from _drop(run_id, inventory, doomed, lease)

    return (yield from _leased(run_id, held, owner, body))


def _record_blob(
    run_id: str, checkpoint_ns: str, checkpoint_id: str, inventory: _Inventory
) -> Plan[bytes | None]:
    """The checkpoint's own blob, where this version or an earlier one put it."""
    refs = inventory.refs.get(checkpoint_ns, {}).get(checkpoint_id, [])
    ref = checkpoint_ref(run_id, checkpoint_ns, checkpoint_id)
    if ref not in refs:
        ref = old_checkpoint_ref(run_id, checkpoint_ns, checkpoint_id)
    blob: bytes | None = yield ("blobs", "get", (ref,))
    return blob


def thread_runs() -> Plan[list[str]]:
    """Every LangGraph thread's run id in the store (by the thread meta's tag)."""
    return (yield from _thread_runs(None))


def delete_for_run(
    run: str,
    run_ids: Sequence[str],
    metadata_run_id: Callable[[CheckpointRecord], object],
    held: Lease | None,
    owner: str,
) -> Plan[None]:
    """Delete, in one thread, the checkpoints (and writes) whose metadata names a run.

    One thread at a time, run by the savers under that thread's lock: a held
    write in flight finishes before the thread is read, so it cannot land
    under a dropped checkpoint behind the hold's memory (cleared afterwards).
    """
    wanted = set(run_ids)
    inventory = _inventory((yield ("blobs", "list_refs", (run,))))
    doomed: dict[str, set[str]] = {}
    for ns, ids in inventory.checkpoints.items():
        for cid in ids:
            blob = yield from _record_blob(run, ns, cid, inventory)
            if blob is not None and metadata_run_id(decode_checkpoint(blob)) in wanted:
                doomed.setdefault(ns, set()).add(cid)
    if doomed:
        yield from _leased(run, held, owner, partial(_drop, run, inventory, doomed))


def copy_thread(
    source_run: str, target_run: str, held: Lease | None, owner: str
) -> Plan[None]:
    """Copy every checkpoint and writes blob under a lease on the target (no old pointer).

    Copied as stored: an earlier version's checkpoint stays one, and reads the same.
    """

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
