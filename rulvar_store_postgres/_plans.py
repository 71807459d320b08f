"""Every store operation as data: what to send, and how its answer becomes a result.

The sync ``PostgresStore`` and the asyncio ``AsyncPostgresStore`` share this one
implementation of argument intake, SQL choice, row decoding and the verdicts
(fenced refusals, the seq guard, a held lease). A plan is a ``Step``: one
statement and a ``finish`` that turns what the server returned into the
operation's value, raises the operation's typed error, or names one more step
(an incremental read that has to start over). The stores only execute steps,
each in its own I/O style; nothing here touches a connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Generic, Literal, TypeVar, cast

from psycopg.rows import RowFactory, scalar_row, tuple_row

from rulvar_store import (
    BlobInput,
    Clock,
    JournalEntry,
    JournalTail,
    Lease,
    RunFilter,
    RunMeta,
)
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    brief_put_args,
    check_run_match,
    finite_seq,
    held_by,
    load_listing,
    load_record,
    load_records,
    meta_matches_filter,
    not_live_lease,
    parse_cursor,
    refuse_if_moved,
)
from rulvar_store.errors import (
    JournalOrderViolation,
    LeaseHeldError,
)
from rulvar_store.ops import LeaseState
from rulvar_store_postgres._schema import STATUS_HELD, STATUS_OK, STATUS_ORDER, Sql

__all__ = ["READ_ROWS", "Plans", "Step"]

T = TypeVar("T")

# mutate: one operation function, its integer result; rows: all rows as
# tuples; values: a one-column read, bare values; none: nothing to send.
StepKind = Literal["mutate", "rows", "values", "none"]
# How a read step's rows come back (the row factories work for both stores).
READ_ROWS: Final[dict[str, RowFactory[Any]]] = {"rows": tuple_row, "values": scalar_row}


@dataclass(frozen=True, slots=True)
class Step(Generic[T]):
    """One statement of an operation and what its answer turns into."""

    operation: str
    kind: StepKind
    statement: str
    args: Sequence[Any]
    finish: Callable[[Any], T | Step[T]]


def _numeric(seq: float | None) -> Decimal | None:
    """A finite seq (D5) as an exact numeric: the same number its JSON text says."""
    if seq is None:
        return None
    return Decimal(repr(seq)) if isinstance(seq, float) else Decimal(seq)


def _fence_args(lease: Lease | None) -> tuple[str | None, int | None]:
    return (None, None) if lease is None else (lease.owner, lease.epoch)


class Plans:
    """The plans of one store: its SQL texts, its ttl and its (optional) test clock."""

    __slots__ = ("_now", "refs_bytewise", "sql", "ttl_ms")

    def __init__(self, sql: Sql, ttl_ms: int, now: Clock | None) -> None:
        self.sql = sql
        self.ttl_ms = ttl_ms
        self._now = now
        # Whether the blobs key orders like bytes; None until learned (_last_ref).
        self.refs_bytewise: bool | None = None

    def clock(self) -> int | None:
        """The injected clock's reading, or ``None``: the server's clock decides."""
        return None if self._now is None else int(self._now())

    def _fenced(
        self,
        operation: str,
        call: str,
        head: Sequence[Any],
        lease: Lease | None,
        finish: Callable[[int], None] | None = None,
    ) -> Step[None]:
        """A fenced mutation with arguments ``head + (owner, epoch, now)``.

        A presented lease that is not live raises ``LeaseHeldError``; any other
        status goes to ``finish``.
        """

        def done(status: int) -> None:
            if status == STATUS_HELD and lease is not None:
                raise not_live_lease(operation, lease)
            if finish is not None:
                finish(status)

        args = (*head, *_fence_args(lease), self.clock())
        return Step(operation, "mutate", call, args, done)

    # -- journal ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None
    ) -> Step[None]:
        """J7 order: run match, fence, then the J6 seq guard."""
        _intake.run_id_for_write(run_id, "append")
        text = _intake.entry_text(entry)
        _intake.numeric_seq(entry)
        lease = _intake.lease_or_none(lease, "append")
        check_run_match(lease, run_id, "append")
        seq = finite_seq(entry)

        def ordered(status: int) -> None:
            if status == STATUS_ORDER:
                raise JournalOrderViolation(
                    f"append to run {run_id!r}: seq {seq} is not above the stored tail",
                    run_id,
                    seq,
                )

        head = (run_id, text, _numeric(seq))
        return self._fenced("append", self.sql.append, head, lease, ordered)

    def load(self, run_id: str) -> Step[list[JournalEntry]]:
        _intake.run_id_for_read(run_id, "load")
        return Step("load", "values", self.sql.load, (run_id,), load_records)

    def load_since(self, run_id: str, cursor: str | None) -> Step[JournalTail]:
        """Entries after ``cursor``; a cursor whose row is gone starts over."""
        _intake.run_id_for_read(run_id, "load_since")
        anchor = parse_cursor(cursor, "postgresql", 1)
        after = 0 if anchor is None else anchor[0]

        def tail(
            rows: list[tuple[Any, ...]], after: int, restarted: bool
        ) -> JournalTail:
            last = int(rows[-1][0]) if rows else after
            payloads = [row[1] for row in rows if row[0] != after]
            return JournalTail(load_records(payloads), f"postgresql:{last}", restarted)

        def first(rows: list[tuple[Any, ...]]) -> JournalTail | Step[JournalTail]:
            if after > 0 and (not rows or rows[0][0] != after):
                # The cursor's row is gone: the run was deleted since. Start over.
                return Step(
                    "load_since",
                    "rows",
                    self.sql.load_since,
                    (0, run_id, 0),
                    lambda again: tail(again, 0, True),
                )
            return tail(rows, after, False)

        return Step(
            "load_since", "rows", self.sql.load_since, (after, run_id, after), first
        )

    def put_meta(self, meta: RunMeta, lease: Lease | None) -> Step[None]:
        run_id, text = _intake.meta_text(meta)
        lease = _intake.lease_or_none(lease, "put_meta")
        check_run_match(lease, run_id, "put_meta")
        return self._fenced("put_meta", self.sql.put_meta, (run_id, text), lease)

    def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease
    ) -> Step[None]:
        """A blob and its run's meta in ONE fenced call (L15): both or neither."""
        _intake.require_lease(lease, "put_with_meta")
        ref, blob_run = _intake.ref_for_write(ref, "put_with_meta")
        run_id, text = _intake.meta_text(meta)
        check_run_match(lease, blob_run, "put_with_meta")
        check_run_match(lease, run_id, "put_with_meta")
        data = _intake.blob_bytes(blob, "put_with_meta")  # copied now (D3)
        head = (run_id, ref, data, text)
        call = self.sql.put_with_meta
        return self._fenced("put_with_meta", call, head, lease)

    def put_meta_and_release(self, meta: RunMeta, lease: Lease) -> Step[None]:
        """The run's meta and the lease's release in ONE fenced call (L15)."""
        _intake.require_lease(lease, "put_meta_and_release")
        run_id, text = _intake.meta_text(meta)
        check_run_match(lease, run_id, "put_meta_and_release")
        call = self.sql.put_meta_and_release
        return self._fenced("put_meta_and_release", call, (run_id, text), lease)

    def get_meta(self, run_id: str) -> Step[RunMeta | None]:
        _intake.run_id_for_read(run_id, "get_meta")

        def first(rows: list[str]) -> RunMeta | None:
            if not rows:
                return None
            meta: RunMeta = load_record(rows[0])
            return meta

        return Step("get_meta", "values", self.sql.get_meta, (run_id,), first)

    def list_runs(self, run_filter: RunFilter | None) -> Step[list[RunMeta]]:
        """Status and name narrow in SQL (M4); the rest of the filter in Python."""
        run_filter = _intake.run_filter(run_filter)
        statuses: list[str] | None = None
        name: str | None = None
        if run_filter is not None:
            if run_filter.status is not None or run_filter.statuses is not None:
                wanted = [run_filter.status] if run_filter.status is not None else []
                wanted += list(run_filter.statuses or ())
                if not wanted:
                    return Step("list_runs", "none", "", (), lambda _: [])
                if all(isinstance(value, str) for value in wanted):
                    statuses = wanted
            if isinstance(run_filter.name, str):
                name = run_filter.name
        statement = self.sql.list_runs_where(statuses is not None, name is not None)
        args = [arg for arg in (statuses, name) if arg is not None]

        def matching(rows: list[str]) -> list[RunMeta]:
            metas: list[RunMeta] = load_listing(
                rows, lambda meta: meta_matches_filter(meta, run_filter)
            )
            return metas

        return Step("list_runs", "values", statement, args, matching)

    def delete(self, run_id: str, lease: Lease | None) -> Step[None]:
        _intake.run_id_for_read(run_id, "delete")
        lease = _intake.lease_or_none(lease, "delete")
        check_run_match(lease, run_id, "delete")
        return self._fenced("delete", self.sql.delete, (run_id,), lease)

    # -- operator reads --------------------------------------------------------

    def meta_page(self, after: str | None, limit: int) -> Step[list[tuple[str, str]]]:
        def pairs(rows: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
            return [(str(row[0]), str(row[1])) for row in rows]

        if after is None:
            return Step("meta_page", "rows", self.sql.meta_page_first, (limit,), pairs)
        _intake.text_for_read(after, "meta_page", "after")
        args = (after, limit)
        return Step("meta_page", "rows", self.sql.meta_page_after, args, pairs)

    def peek_lease(self, run_id: str) -> Step[LeaseState | None]:
        _intake.run_id_for_read(run_id, "peek_lease")

        def state(rows: list[tuple[Any, ...]]) -> LeaseState | None:
            if not rows:
                return None
            owner, epoch, expires_at, now = rows[0]
            return LeaseState(run_id, str(owner), int(epoch), int(expires_at), int(now))

        args = (self.clock(), run_id)
        return Step("peek_lease", "rows", self.sql.peek_lease, args, state)

    # -- leases ----------------------------------------------------------------

    def acquire(
        self, run_id: str, owner: str, liveness: int | None = None
    ) -> Step[Lease]:
        """Take the lease; ``liveness`` is this process's liveness key (L11).

        A refusal reads the holder's row after the call (one more round trip,
        on the refused path only) to name the holder and its expiry.
        """
        _intake.run_id_for_write(run_id, "acquire")
        _intake.owner_for_write(owner, "acquire")

        def granted(epoch: int) -> Lease | Step[Lease]:
            if epoch <= 0:
                return self._refusal(run_id, -epoch)
            return Lease(run_id, owner, epoch)

        args = (run_id, owner, self.ttl_ms, self.clock(), liveness)
        return Step("acquire", "mutate", self.sql.acquire, args, granted)

    def brief_put(
        self,
        owner: str,
        ref: str,
        blob: BlobInput,
        under: str,
        tail: str,
        meta: RunMeta | None,
        meta_replaces: bool,
        need_prior: bool,
    ) -> Step[bool]:
        """Acquire, one blob put (and maybe the run's meta) and release in ONE call (L16).

        ``under`` is a prefix of refs of the blob's run and ``tail`` a POSIX
        regular expression: a stored ref counts as prior when it starts with
        ``under`` and the rest matches ``tail``. The value is whether one was
        stored before the put. The value is whether the put was done: with
        ``need_prior`` and no prior ref, nothing is written and the epoch
        does not move (``False``). ``meta`` is written
        only when none was prior: replacing the stored meta, or only where
        the run has none (``meta_replaces=False``).
        """
        checked = brief_put_args(owner, ref, blob, under, tail, meta)

        def done(epoch: int) -> bool | Step[bool]:
            if epoch < 0:  # held: the refusal names the holder (L12), and raises
                return cast(Step[bool], self._refusal(checked.run_id, -epoch))
            return epoch > 0

        args = (
            checked.run_id,
            checked.owner,
            self.clock(),
            checked.ref,
            checked.data,
            checked.under,
            checked.bound,
            bool(self.refs_bytewise),
            checked.tail.pattern,
            checked.meta_text,
            meta_replaces,
            need_prior,
        )
        return Step("brief_put", "mutate", self.sql.brief_put, args, done)

    def _refusal(self, run_id: str, epoch: int) -> Step[Lease]:
        """The L1 refusal naming the holder and its expiry, read after the call."""

        def refuse(rows: list[tuple[Any, ...]]) -> Lease:
            refuse_if_moved(run_id, str(rows[0][0]) if rows else None, epoch)  # V4
            if rows and int(rows[0][1]) == epoch:
                owner, _, expires_at, now = rows[0]
                raise held_by(run_id, str(owner), epoch, int(expires_at) - int(now))
            # Released or taken over since: the refusal still stands.
            raise LeaseHeldError(
                f"run {run_id!r} was leased at epoch {epoch}", run_id, None, epoch
            )

        args = (self.clock(), run_id)
        return Step("acquire", "rows", self.sql.peek_lease, args, refuse)

    def _live_only(
        self, operation: str, call: str, lease: Lease, *extra: Any
    ) -> Step[None]:
        _intake.require_lease(lease, operation)

        def done(status: int) -> None:
            if status != STATUS_OK:
                raise not_live_lease(operation, lease)

        args = (lease.run_id, lease.owner, lease.epoch, *extra, self.clock())
        return Step(operation, "mutate", call, args, done)

    def renew(self, lease: Lease) -> Step[None]:
        return self._live_only("renew", self.sql.renew, lease, self.ttl_ms)

    def release(self, lease: Lease) -> Step[None]:
        return self._live_only("release", self.sql.release, lease)

    # -- blobs (the fenced twin) -----------------------------------------------

    def blob_put(self, ref: str, blob: BlobInput, lease: Lease | None) -> Step[None]:
        ref, run_id = _intake.ref_for_write(ref, "blob put")
        lease = _intake.lease_or_none(lease, "blob put")
        check_run_match(lease, run_id, "blob put")
        # Copied now: a later mutation must not leak in (D3).
        data = _intake.blob_bytes(blob, "blob put")
        return self._fenced("blob_put", self.sql.blob_put, (run_id, ref, data), lease)

    def blob_get(self, ref: str) -> Step[bytes | None]:
        _intake.ref_for_read(ref, "blob get")

        def first(rows: list[Any]) -> bytes | None:
            return None if not rows else bytes(rows[0])

        return Step("blob_get", "values", self.sql.blob_get, (ref,), first)

    def blob_list(self, run_id: str) -> Step[list[str]]:
        """Refs under ``run_id + "/"``, sorted by code point (T4).

        A run id with '/' (only the reference's rows can have one) lists the
        refs under that longer prefix, as on every backend: the rows of its
        run are read by the leading segment, then the prefix is kept.
        """
        _intake.run_id_for_read(run_id, "blob list_refs")
        prefix = run_id + "/"

        def under(rows: list[Any]) -> list[str]:
            return sorted(
                ref for value in rows if (ref := str(value)).startswith(prefix)
            )

        args = (run_id.split("/", 1)[0],)
        return Step("blob_list", "values", self.sql.blob_list, args, under)

    def blob_delete(self, ref: str, lease: Lease | None) -> Step[None]:
        ref, run_id = _intake.ref_for_read(ref, "blob delete")
        lease = _intake.lease_or_none(lease, "blob delete")
        check_run_match(lease, run_id, "blob delete")
        return self._fenced("blob_delete", self.sql.blob_delete, (run_id, ref), lease)
