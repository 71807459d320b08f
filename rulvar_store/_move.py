"""Copy and move runs between stores, epochs carried and the source fenced (V1-V8).

One run at a time (``copy_run``; ``copy_runs`` for many), under the mover's
lease (owner ``rulvar-move:...``, ``_move_base``):

1. The source lease freezes the run: no owner can write while it is read, and
   its epoch is the source's counter (L3). A run under another live lease is
   skipped (or waited for); a lease of an earlier mover (killed part way) is
   always waited out: its ttl is short.
2. At the destination, a store with the row abilities checks in every write's
   own transaction that no owner holds the run; others are written under a
   mover's lease there too. What the destination already holds must be a
   prefix of the source (a copy killed part way): only the rest is written, so
   a re-run never duplicates nor loses an entry (``_move_io``).
3. Journal, meta and blobs are copied record by record (raw stored text where
   both stores offer ``_move_rows``), one bounded batch in memory at a time.
4. The destination's epoch counter is raised above the source's: one past it
   for a copy, two past it for a move (one past the tombstone's).
5. ``move`` verifies the destination against the source, then turns its source
   lease into the tombstone (``_moved``): no source owner can write again, and
   a new acquire there raises ``RunMovedError`` naming the destination.

A store without leases (the file store) is read or written without them and
has no epoch to carry; a move needs a source that writes tombstones.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from rulvar_store._move_base import (
    BATCH_BYTES,
    BATCH_ENTRIES,
    MOVER_OWNER_PREFIX,
    MOVER_TTL_MS,
    CopyOutcome,
    StorePair,
    _acquire,
    _destination_ready,
    _Keeper,
    _raise_epoch_by_leases,
    _refusal,
    _release_quietly,
    _writes_rows,
    flush_destination,
    mover_owner,
)
from rulvar_store._move_io import (
    _NO_SUCH_RUN,
    RunReader,
    RunWriter,
    _absent,
    run_digest,
    verify_run,
)
from rulvar_store._move_rows import has_run_batches, has_run_rows_writer
from rulvar_store._moved import moved_owner
from rulvar_store._records import Lease
from rulvar_store._retention import is_leasable
from rulvar_store.errors import (
    ConfigError,
    CopyConflictError,
    LeaseHeldError,
    RunMovedError,
    StoreBusyError,
)

__all__ = [
    "MOVER_OWNER_PREFIX",
    "MOVER_TTL_MS",
    "CopyOutcome",
    "RunReader",
    "RunWriter",
    "StorePair",
    "check_movable",
    "copy_run",
    "copy_runs",
    "flush_destination",
    "mover_owner",
    "run_digest",
    "verify_run",
]


def check_movable(source: StorePair) -> None:
    """Raise ``ConfigError`` unless ``source`` can be fenced by a tombstone (V4).

    Raises:
        ConfigError: the source takes no leases (the file store) or cannot
            write the tombstone (a store without ``fence_moved``): copy instead.
    """
    journal = source.journal
    if not is_leasable(journal) or not has_run_rows_writer(journal):
        raise ConfigError(
            f"{type(journal).__name__} cannot fence a moved run (it has no leases or "
            "no fence_moved): use 'runs copy', then retire the source yourself"
        )


@dataclass(slots=True)
class _Staged:
    """A small run read whole under its source lease, waiting for its group's write."""

    run_id: str
    lease: Lease | None
    meta: str | None
    entries: list[str]
    blobs: list[tuple[str, bytes]]
    target: int
    size: int


_GROUP_RUNS: Final = 200


def _stage(
    source: StorePair, run_id: str, owner: str, wait_s: float
) -> _Staged | CopyOutcome | None:
    """Read ``run_id`` whole if it is small (a quarter batch); None if it is not."""
    journal: Any = source.journal
    lease: Lease | None = None
    if is_leasable(journal):
        got = _acquire(journal, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            return CopyOutcome(run_id, "skipped", detail=_refusal("source", got))
        lease = got
    reader = RunReader(source, run_id)
    budget = BATCH_BYTES // 4
    meta = reader.meta_text()
    size = len(meta or "")
    entries: list[str] = []
    blobs: list[tuple[str, bytes]] = []
    for text in reader.entry_texts():
        entries.append(text)
        size += len(text)
        if size > budget or len(entries) >= BATCH_ENTRIES:
            _release_quietly(journal, lease)
            return None
    for ref, data in reader.blobs():
        blobs.append((ref, data))
        size += len(data)
        if size > budget or len(blobs) >= BATCH_ENTRIES:
            _release_quietly(journal, lease)
            return None
    if meta is None and not entries and not blobs:
        _release_quietly(journal, lease)
        return CopyOutcome(run_id, "skipped", detail=_NO_SUCH_RUN)
    epoch = max(lease.epoch if lease is not None else 0, reader.epoch())
    return _Staged(run_id, lease, meta, entries, blobs, epoch + 1 if epoch else 0, size)


def _write_group(
    source: StorePair,
    destination: StorePair,
    group: list[_Staged],
    owner: str,
    wait_s: float,
) -> list[CopyOutcome]:
    """One transaction for the group's runs; run by run if any is not new there."""
    journal: Any = destination.journal
    try:
        journal.write_runs(
            [(s.run_id, s.entries, s.meta, s.target, s.blobs) for s in group],
            durable=False,
        )
    except (CopyConflictError, LeaseHeldError, StoreBusyError):
        for staged in group:
            _release_quietly(source.journal, staged.lease)
        return [
            copy_run(
                source, destination, s.run_id, wait_s=wait_s, owner=owner, durable=False
            )
            for s in group
        ]
    for staged in group:
        _release_quietly(source.journal, staged.lease)
    return [
        CopyOutcome(
            s.run_id,
            "copied",
            len(s.entries),
            len(s.blobs),
            s.size,
            s.target or None,
            f"{len(s.entries)} entries, {len(s.blobs)} blobs"
            + (", meta" if s.meta is not None else ""),
        )
        for s in group
    ]


def copy_runs(
    source: StorePair,
    destination: StorePair,
    run_ids: Iterable[str],
    *,
    move: bool = False,
    destination_name: str = "",
    wait_s: float = 0.0,
    verify: bool = False,
    flush_every: int = 256,
) -> Iterator[CopyOutcome]:
    """``copy_run`` over many runs, the destination's durability paid per group.

    Each run's writes commit without waiting for their flush; every
    ``flush_every`` runs (and at the end) one barrier makes them durable, and
    only then are their outcomes yielded. A crash before a barrier loses only
    runs not yet reported, which the same call copies again. (A move flushes
    before each tombstone as well.)

    A copy (not a move, not verified) into a store offering ``write_runs``
    (PostgreSQL) writes small runs, each read whole under its own source lease,
    many to a transaction: new at the destination, each checked there as
    ``write_rows`` checks one; a group with any run not new is written run by
    run instead.
    """
    owner = mover_owner()
    batches = has_run_batches(destination.journal) and not move and not verify
    pending: list[CopyOutcome] = []
    group: list[_Staged] = []
    group_size = 0
    for run_id in run_ids:
        staged = _stage(source, run_id, owner, wait_s) if batches else None
        if isinstance(staged, CopyOutcome):
            pending.append(staged)
            continue
        if isinstance(staged, _Staged):
            group.append(staged)
            group_size += staged.size
            if group_size >= BATCH_BYTES or len(group) >= _GROUP_RUNS:
                pending.extend(_write_group(source, destination, group, owner, wait_s))
                group, group_size = [], 0
        else:
            pending.append(
                copy_run(
                    source,
                    destination,
                    run_id,
                    move=move,
                    destination_name=destination_name,
                    wait_s=wait_s,
                    verify=verify,
                    owner=owner,
                    durable=False,
                )
            )
        if len(pending) >= flush_every:
            flush_destination(destination)
            yield from pending
            pending = []
    if group:
        pending.extend(_write_group(source, destination, group, owner, wait_s))
    flush_destination(destination)
    yield from pending


def copy_run(
    source: StorePair,
    destination: StorePair,
    run_id: str,
    *,
    move: bool = False,
    destination_name: str = "",
    wait_s: float = 0.0,
    verify: bool = False,
    owner: str | None = None,
    durable: bool = True,
) -> CopyOutcome:
    """Copy (or move) one run from ``source`` to ``destination``; see the module doc.

    ``destination_name`` is what the tombstone names (a URL without password);
    ``wait_s`` how long to wait for a run under a live lease. Idempotent: a run
    copied before is brought up to date, a run moved before to the same
    destination is ``already-moved``. ``durable=False`` lets the destination
    acknowledge writes before they are durable (PostgreSQL: asynchronous
    commit); the caller must then call ``flush_destination`` before it reports
    the run copied (``copy_runs`` does). A move flushes before its tombstone.

    Raises:
        ConfigError: ``move`` from a store that cannot be fenced (``check_movable``).
        StoreBusyError, StoreUnavailableError: a store did not answer.
    """
    if move:
        check_movable(source)
    if _absent(RunReader(source, run_id)):
        return CopyOutcome(run_id, "skipped", detail=_NO_SUCH_RUN)
    owner = owner or mover_owner()
    src_j: Any = source.journal
    keeper = _Keeper()
    src_lease: Lease | None = None
    if is_leasable(src_j):
        got = _acquire(src_j, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            if (
                isinstance(got, RunMovedError)
                and move
                and got.destination == destination_name
            ):
                return CopyOutcome(
                    run_id, "already-moved", epoch=got.epoch, detail=str(got)
                )
            return CopyOutcome(run_id, "skipped", detail=_refusal("source", got))
        src_lease = got
        keeper.hold(src_j, got)
    try:
        return _copy_locked(
            source,
            destination,
            run_id,
            src_lease,
            keeper,
            move,
            destination_name,
            wait_s,
            verify,
            owner,
            durable,
        )
    finally:
        if src_lease is not None:  # a move turned it into the tombstone already
            _release_quietly(src_j, src_lease)


def _copy_locked(
    source: StorePair,
    destination: StorePair,
    run_id: str,
    src_lease: Lease | None,
    keeper: _Keeper,
    move: bool,
    destination_name: str,
    wait_s: float,
    verify: bool,
    owner: str,
    durable: bool,
) -> CopyOutcome:
    src_j: Any = source.journal
    dst_j: Any = destination.journal
    reader = RunReader(source, run_id)
    if src_lease is not None:
        # The counter is the lease's epoch (L3); a store that reads it may know more.
        source_epoch = max(src_lease.epoch, reader.epoch())
        target = source_epoch + (2 if move else 1)
    else:
        source_epoch = reader.epoch()
        target = source_epoch + 1 if source_epoch else 0
    dst_lease: Lease | None = None
    if is_leasable(dst_j) and not _writes_rows(dst_j):
        got = _acquire(dst_j, run_id, owner, wait_s)
        if isinstance(got, LeaseHeldError):
            return CopyOutcome(run_id, "skipped", detail=_refusal("destination", got))
        dst_lease = got
        keeper.hold(dst_j, got)
    try:
        for attempt in (1, 2):
            writer = RunWriter(destination, run_id, dst_lease, keeper)
            writer.durable = durable
            try:
                entries, meta_written, blobs = writer.journal_and_meta(
                    reader.meta_text(), reader.entry_texts(), target, reader.blobs()
                )
                break
            except LeaseHeldError as exc:
                if dst_lease is not None or attempt == 2:
                    # A mover's lease ran out under it (a pause past the ttl):
                    # the re-run resumes from what did land.
                    return CopyOutcome(
                        run_id, "failed", detail=f"the copy lost its lease: {exc}"
                    )
                # A live owner at the destination: wait for it (or report it).
                waited = _destination_ready(dst_j, run_id, owner, wait_s, keeper)
                if isinstance(waited, LeaseHeldError):
                    return CopyOutcome(
                        run_id, "skipped", detail=_refusal("destination", waited)
                    )
        if verify or move:
            problems = verify_run(source, destination, run_id, epoch_at_least=target)
            if problems:
                return CopyOutcome(
                    run_id,
                    "failed",
                    entries,
                    blobs,
                    writer.written_bytes,
                    None,
                    "; ".join(problems),
                )
    except CopyConflictError as exc:
        return CopyOutcome(run_id, "failed", detail=str(exc))
    finally:
        if dst_lease is not None:
            keeper.drop(dst_lease)
            _release_quietly(dst_j, dst_lease)
    epoch: int | None = None
    if is_leasable(dst_j) and target:
        epoch = (
            target
            if writer.rows
            else _raise_epoch_by_leases(dst_j, run_id, target, owner)
        )
    detail = f"{entries} entries, {blobs} blobs" + (", meta" if meta_written else "")
    if not move:
        return CopyOutcome(
            run_id, "copied", entries, blobs, writer.written_bytes, epoch, detail
        )
    assert src_lease is not None  # check_movable: the source is leasable
    if not durable:
        flush_destination(destination)  # the copy is durable before the fence
    keeper.drop(src_lease)
    tombstone = src_j.fence_moved(src_lease, moved_owner(destination_name))
    return CopyOutcome(
        run_id,
        "moved",
        entries,
        blobs,
        writer.written_bytes,
        epoch,
        f"{detail}; source fenced at epoch {tombstone}",
    )
