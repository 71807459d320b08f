"""``SqliteStore``: the fenced journal, meta, lease and blob store in one SQLite file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar

import apsw

from rulvar_store import (
    DEFAULT_LEASE_TTL_MS,
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
    BriefPutArgs,
    DurabilityReport,
    Observed,
    TelemetryTarget,
    batch_recorder,
    brief_put_args,
    check_run_match,
    finite_seq,
    held_by,
    holder_is_dead,
    instrumented,
    load_listing,
    load_record,
    load_records,
    meta_matches_filter,
    note_telemetry,
    parse_cursor,
    refuse_if_moved,
    this_process,
)
from rulvar_store.errors import (
    JournalOrderViolation,
    LeaseHeldError,
)
from rulvar_store.ops import LeaseState
from rulvar_store_sqlite import _move_rows
from rulvar_store_sqlite import _sql as sql
from rulvar_store_sqlite._brief import BriefWork, brief_lease_op
from rulvar_store_sqlite._brief_put import brief_put_op
from rulvar_store_sqlite._connection import BootAttempt, BusyDeadline, open_connection
from rulvar_store_sqlite._exact_seq import seq_text
from rulvar_store_sqlite._group_commit import GroupCommitter, OwnedRLock
from rulvar_store_sqlite._options import (
    DEFAULT_BUSY_TIMEOUT_MS,
    Synchronous,
    validate_options,
)
from rulvar_store_sqlite._schema import bootstrap
from rulvar_store_sqlite._transaction import Operation, one_statement

if TYPE_CHECKING:
    from rulvar_store_sqlite._transcripts import SqliteFencedTranscriptStore

__all__ = ["SqliteStore"]

T = TypeVar("T")


def sqlite_target(path: str) -> TelemetryTarget:
    """``db.namespace`` of a SQLite store: its file's path (``:memory:`` as such)."""
    return TelemetryTarget("sqlite", path)


# Nested: ``AsyncSqliteStore`` runs these reads inside its own counted calls.
@instrumented(lambda store: sqlite_target(store.path), role="journal", nested=True)
class SqliteStore(Observed):
    """Leasable, fenced, meta-lookup journal store in one SQLite file (CONTRACT 6).

    Entries, metas, leases, epoch tombstones and blobs (``transcripts()``) live in
    one database, so every fence check and its guarded mutation commit together in
    one ``BEGIN IMMEDIATE`` transaction. Many processes on ONE host may share the
    file (WAL needs shared memory; never a network filesystem); one instance is
    safe across threads (an instance lock serializes its single connection, Q9).

    Args:
        path: database file (created if missing) or ``":memory:"`` (private to
            this instance, Q10).
        ttl_ms: lease length (D9), default 60 000.
        busy_timeout_ms: longest a call waits for the file's write lock (queued
            behind other writers) before raising ``StoreBusyError``; default
            5 000, well below the default ttl. ``0`` fails fast.
        synchronous: ``"FULL"`` (default) syncs the WAL on every commit, so an
            acknowledged write survives power loss. ``"NORMAL"`` syncs only at
            checkpoints and is several times faster, but the last acknowledged
            commits can roll back after a power loss or OS crash (never after a
            process crash). A lost ``acquire`` is the worst of them: the epoch
            counter goes back, and a later acquire reissues the same epoch to a
            second holder, so anything that already saw the first holder's epoch
            (its journaled work, a downstream system keyed by epoch) can no
            longer tell the two apart. Lost terminal entries also mean work is
            paid for again on resume. Choose NORMAL only where both are
            acceptable.
        now: clock in Unix ms (tests inject one); default the wall clock.
        readonly: open the file with ``SQLITE_OPEN_READONLY`` for observers:
            no bootstrap, no WAL switch, and SQLite refuses every write on the
            connection (a write call raises a non-retryable ``ConfigError``). The
            file must already hold a store.
        group_commit: let threads writing through this instance at the same
            time share one transaction and one durable COMMIT, each operation
            with its own fence check, seq guard and outcome, undone alone if
            it fails (default True; see ``_group_commit``). A lone caller never
            waits for company.

    Raises:
        ConfigError: a bad option (before the file is touched), an unopenable
            path, or a file whose tables have another shape.
        StoreBusyError: the bootstrap stayed busy for ``BOOT_BUSY_TIMEOUT_MS``.
    """

    fenced_writes: Literal[True] = True
    # The door's class; only the conformance self-tests' seeded defects change it.
    _door_type: ClassVar[type[GroupCommitter]] = GroupCommitter
    # Whether a leased append may check its fence inside its INSERT; seeded
    # defects that move the fence step (out of the transaction) turn it off.
    _fence_in_insert_ok: ClassVar[bool] = True

    def __init__(
        self,
        path: str,
        *,
        ttl_ms: int = DEFAULT_LEASE_TTL_MS,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: Synchronous = "FULL",
        now: Clock | None = None,
        readonly: bool = False,
        group_commit: bool = True,
        private: bool = True,
        _boot_attempt: BootAttempt = bootstrap,
    ) -> None:
        options = validate_options(
            path,
            ttl_ms=ttl_ms,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
            now=now,
            readonly=readonly,
            group_commit=group_commit,
            private=private,
        )
        self.readonly: bool = options.readonly
        self.path: str = options.path
        self.lease_ttl_ms: int = options.ttl_ms
        self.busy_timeout_ms: int = options.busy_timeout_ms
        self.synchronous: Synchronous = options.synchronous
        self._now: Clock = options.now
        self.group_commit: bool = options.group_commit
        busy = BusyDeadline(options.busy_timeout_ms)
        self._lock = OwnedRLock()
        self._twin: SqliteFencedTranscriptStore | None = None
        # The one door: connection, cursor, busy deadline, every read and write.
        self._door = self._door_type(
            open_connection(options, _boot_attempt, busy),
            busy,
            self._lock,
            self.path,
            grouping=options.group_commit,
        )
        self._conn = self._door.conn
        self._cursor = self._door.cursor
        self._door.on_batch = batch_recorder(self)
        # A leased append checks its fence inside its guarded INSERT (one
        # statement, ``_append_op``), unless a subclass replaced the fence (the
        # Q13 seam, as the conformance kit's seeded defects do): its own fence
        # then runs before every write, as it always did.
        self._fence_in_insert: bool = (
            self._fence_in_insert_ok
            and type(self)._assert_fencing is SqliteStore._assert_fencing
        )

    # -- lifecycle -------------------------------------------------------------

    def transcripts(self) -> SqliteFencedTranscriptStore:
        """Return the memoized fenced blob twin: same connection, lock and file (T6, T7)."""
        from rulvar_store_sqlite._transcripts import SqliteFencedTranscriptStore

        # Before the lock: a lock a parent thread held at a fork stays held in the child.
        self._door.fork.check("transcripts")
        with self._lock:
            self._door.ensure_open("transcripts")
            if self._twin is None:
                self._twin = SqliteFencedTranscriptStore(self._door, self._fence)
            return self._twin

    def close(self) -> None:
        """Close the connection, which also ends the twin; idempotent."""
        self._door.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _assert_fencing(self, lease: Lease) -> None:
        """Raise unless ``lease`` is the live lease of its run (L6); the Q13 seam.

        Called inside the write transaction, after BEGIN IMMEDIATE and before the
        mutation, so no other connection can change the lease row in between.

        Raises:
            LeaseHeldError: no live row with this owner and epoch.
        """
        self._assert_fencing_at(lease, self._now())

    def _assert_fencing_at(self, lease: Lease, now: int) -> None:
        """``_assert_fencing`` at the time ``now`` (Unix ms)."""
        rows = self._cursor.execute(
            sql.LIVE_LEASE_MATCHES, (lease.run_id, lease.owner, lease.epoch, now)
        ).fetchall()
        if not rows:
            raise LeaseHeldError(
                f"lease of run {lease.run_id!r} (owner {lease.owner!r}, epoch "
                f"{lease.epoch}) is not the live lease",
                lease.run_id,
                lease.owner,
                lease.epoch,
            )

    def _fence(self, lease: Lease | None) -> Callable[[], None] | None:
        if lease is None:
            return None
        return lambda: self._assert_fencing(lease)

    # -- journal ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append one entry; J7 order: run match, fence, then the J6 seq guard.

        Raises:
            LeaseHeldError: the lease names another run or is not live.
            JournalOrderViolation: a finite seq not above every stored seq.
            InvalidArgumentError: a bad run id, entry or lease (``_intake`` rules).
            NotJsonError: the entry is not JSON (nothing persisted, D2).
        """
        self._door.submit(self._append_op(run_id, entry, lease))

    def _append_op(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> Operation[None]:
        """The operation of ``append``: checked arguments, fence, mutation."""
        _intake.run_id_for_write(run_id, "append")
        text = _intake.entry_text(entry)
        check_run_match(_intake.lease_or_none(lease, "append"), run_id, "append")
        seq = finite_seq(entry)
        if seq is not None and lease is not None and self._fence_in_insert:
            return self._fenced_append_op(run_id, text, seq, lease)

        def mutate(cursor: apsw.Cursor) -> None:
            if seq is None:
                cursor.execute(sql.INSERT_ENTRY, (run_id, text))
                return
            cursor.execute(
                sql.INSERT_ENTRY_ABOVE_TAIL,
                (run_id, text, sql.seq_param(seq), seq_text(seq)),
            )
            if self._conn.changes() == 0:
                raise _not_above_tail(run_id, seq)

        return Operation("append", self._fence(lease), mutate, atomic=True)

    def _fenced_append_op(
        self, run_id: str, text: str, seq: int | float, lease: Lease
    ) -> Operation[None]:
        """A leased, seq-guarded append as ONE statement: fence and guard in the INSERT.

        The fence step only reads the clock, at the point the separate fence
        check would run, so a failpoint or an injected clock sees the same
        order. When no row lands, the fence runs alone at that same time: a
        lease that is not live is refused as such (J7), else the seq is.
        """
        now = 0

        def stamp() -> None:
            nonlocal now
            now = self._now()

        def mutate(cursor: apsw.Cursor) -> None:
            cursor.execute(
                sql.INSERT_ENTRY_FENCED_ABOVE_TAIL,
                (
                    run_id,
                    text,
                    sql.seq_param(seq),
                    seq_text(seq),
                    lease.owner,
                    lease.epoch,
                    now,
                ),
            )
            if self._conn.changes() == 0:
                self._assert_fencing_at(lease, now)
                raise _not_above_tail(run_id, seq)

        return Operation("append", stamp, mutate, atomic=True)

    def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order, freshly parsed; [] if unknown."""
        _intake.run_id_for_read(run_id, "load")
        return load_records(self._door.read_values("load", sql.LOAD_ENTRIES, (run_id,)))

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` (O(new entries); ``_incremental``).

        The cursor is the id of the last entry returned; entry ids are never
        reused, so a cursor whose entry is gone means the run was deleted since:
        the read then starts over (``restarted``).
        """
        _intake.run_id_for_read(run_id, "load_since")
        anchor = parse_cursor(cursor, "sqlite", 1)
        after = 0 if anchor is None else anchor[0]
        rows = self._door.read("load_since", sql.LOAD_ENTRIES_SINCE, (run_id, after))
        restarted = after > 0 and (not rows or rows[0][0] != after)
        if restarted:
            after = 0
            rows = self._door.read("load_since", sql.LOAD_ENTRIES_SINCE, (run_id, 0))
        last = rows[-1][0] if rows else after
        payloads = [row[1] for row in rows if row[0] != after]
        return JournalTail(
            load_records(payloads),  # type: ignore[arg-type]  # TEXT column
            f"sqlite:{last}",
            restarted,
        )

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the run's whole meta record (M2), fenced when leased (F1).

        Raises:
            InvalidArgumentError: meta is not a dict with a valid ``runId``.
            LeaseHeldError: the lease names another run or is not live.
            NotJsonError: the meta is not JSON (nothing persisted, D2).
        """
        self._door.submit(self._put_meta_op(meta, lease))

    def _put_meta_op(
        self, meta: RunMeta, lease: Lease | None = None
    ) -> Operation[None]:
        """The operation of ``put_meta``: checked arguments, fence, mutation."""
        run_id, text = _intake.meta_text(meta)
        check_run_match(_intake.lease_or_none(lease, "put_meta"), run_id, "put_meta")
        return Operation(
            "put_meta",
            self._fence(lease),
            one_statement(sql.UPSERT_META, (run_id, text)),
            atomic=True,
        )

    def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta by primary key, or ``None`` (M5)."""
        _intake.run_id_for_read(run_id, "get_meta")
        rows = self._door.read_values("get_meta", sql.GET_META, (run_id,))
        return load_record(rows[0]) if rows else None

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return matching metas ordered by run id (Q11, M4, D7).

        ``status``/``statuses``/``name`` narrow in SQL (``statuses=[]`` alone
        matches nothing); tags are checked in Python, and D7 is re-applied.
        """
        checked = _intake.run_filter(run_filter)
        query = sql.list_meta_query(checked)
        if query is None:
            return []
        metas: list[RunMeta] = load_listing(
            self._door.read_values("list_runs", *query),
            lambda meta: meta_matches_filter(meta, checked),
        )
        return metas

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove entries, meta and lease row in one transaction; keep the epoch (M6, L5).

        Raises:
            LeaseHeldError: the lease names another run or is not live.
        """
        self._door.submit(self._delete_op(run_id, lease))

    def _delete_op(self, run_id: str, lease: Lease | None = None) -> Operation[None]:
        """The operation of ``delete``: checked arguments, fence, mutation."""
        _intake.run_id_for_read(run_id, "delete")
        check_run_match(_intake.lease_or_none(lease, "delete"), run_id, "delete")

        def mutate(cursor: apsw.Cursor) -> None:
            cursor.execute(sql.DELETE_ENTRIES, (run_id,))
            cursor.execute(sql.DELETE_META, (run_id,))
            if lease is None:
                cursor.execute(sql.DELETE_LEASE_ANY, (run_id,))
            else:
                cursor.execute(sql.RELEASE_LEASE, (run_id, lease.owner, lease.epoch))

        return Operation("delete", self._fence(lease), mutate)

    # -- durability (rulvar_store.backend.ReportsDurability) --------------------

    def _telemetry_figures(self) -> dict[str, int]:
        """The door's commit batches and the busy handler's retries."""
        door = self._door
        return {
            "group_commit_batches": door.batches,
            "group_commit_operations": door.operations,
            "busy_retries": door.busy_retries,
        }

    def durability(self) -> DurabilityReport:
        """The ``synchronous`` level this store promises and the one its connection runs.

        Read back from the connection on every call (a PRAGMA run behind the
        store's back, or a build with another default, shows here).
        """
        level = self._door.read("durability", sql.SYNCHRONOUS_LEVEL, ())[0][0]
        observed = sql.SYNCHRONOUS_NAMES.get(level, str(level))  # type: ignore[arg-type]  # INTEGER column
        return DurabilityReport("synchronous", self.synchronous, observed)

    # -- operator reads (rulvar_store._observe) --------------------------------

    def meta_page(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Return up to ``limit`` (run id, meta text) pairs after ``after``, by run id.

        Unparsed, so a malformed row is the caller's diagnostic, not a failed page.
        """
        if after is None:
            rows = self._door.read("meta_page", sql.META_PAGE_FIRST, (limit,))
        else:
            _intake.text_for_read(after, "meta_page", "after")
            rows = self._door.read("meta_page", sql.META_PAGE_AFTER, (after, limit))
        return [(str(row[0]), str(row[1])) for row in rows]

    def peek_lease(self, run_id: str) -> LeaseState | None:
        """Return the run's lease row as it stands; takes nothing, moves no epoch."""
        _intake.run_id_for_read(run_id, "peek_lease")
        rows = self._door.read("peek_lease", sql.LEASE_ROW, (run_id,))
        if not rows:
            return None
        owner, epoch, expires_at = rows[0]
        return LeaseState(run_id, str(owner), int(epoch), int(expires_at), self._now())  # type: ignore[arg-type]  # INTEGER columns

    # -- copies (rulvar_store._move_rows) --------------------------------------

    def entry_rows(self, run_id: str, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (row id, entry text) pairs after row id ``after``."""
        return _move_rows.entry_rows(self, run_id, after, limit)

    def entry_count(self, run_id: str) -> int:
        return _move_rows.entry_count(self, run_id)

    def meta_row(self, run_id: str) -> str | None:
        return _move_rows.meta_row(self, run_id)

    def epoch_counter(self, run_id: str) -> int:
        return _move_rows.epoch_counter(self, run_id)

    def write_rows(
        self,
        run_id: str,
        lease: Lease | None,
        *,
        expected_entries: int,
        entries: Sequence[str],
        meta: str | None,
        epoch: int,
        blobs: Sequence[tuple[str, bytes]] = (),
        durable: bool = True,
    ) -> None:
        """Entry texts, meta text and an epoch floor in one fenced transaction."""
        self._door.submit(
            _move_rows.write_rows_op(
                self, run_id, lease, expected_entries, entries, meta, epoch, blobs
            )
        )

    def flush_writes(self) -> None:
        """A durability barrier: every commit here is durable at the store's level."""

    def orphan_page(self, kind: str, after: str | None, limit: int) -> list[str]:
        """Run ids after ``after`` of orphan journals or blobs (``_orphans``)."""
        return _move_rows.orphan_page(self, kind, after, limit)

    def fence_moved(self, lease: Lease, owner: str) -> int:
        """Turn the live ``lease`` into the moved-run tombstone (``_moved``)."""
        return self._door.submit(_move_rows.fence_moved_op(self, lease, owner))

    # -- leases ----------------------------------------------------------------

    def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with an epoch above every earlier one (L1-L3).

        Raises:
            LeaseHeldError: another lease of the run is live (retry after it ends).
        """
        return self._door.submit(self._acquire_op(run_id, owner))

    def _acquire_op(self, run_id: str, owner: str) -> Operation[Lease]:
        """The operation of ``acquire``: checked arguments, fence, mutation."""
        _intake.run_id_for_write(run_id, "acquire")
        _intake.owner_for_write(owner, "acquire")
        now = 0
        replaced = False  # a lease row is there: this acquire takes the run over
        dead: tuple[str, int] | None = None  # a dead holder's (owner, epoch)

        def check_free() -> None:
            nonlocal now, replaced, dead
            now, replaced, dead = self._check_free(run_id, take_dead=True)

        def take(cursor: apsw.Cursor) -> Lease:
            epoch = cursor.execute(sql.BUMP_EPOCH, (run_id,)).fetchall()[0][0]
            assert isinstance(epoch, int)
            row = (run_id, owner, epoch, now + self.lease_ttl_ms, now)
            if dead is None:
                cursor.execute(sql.TAKE_LEASE, row)
            else:
                cursor.execute(sql.TAKE_LEASE_FROM_DEAD, (*row, *dead))
            if self._conn.changes() != 1:
                raise LeaseHeldError(
                    f"run {run_id!r} was leased concurrently", run_id, None, None
                )
            self._record_holder(cursor, run_id, epoch)
            if replaced:
                note_telemetry(self, "leases_taken_over")
            return Lease(run_id, owner, epoch)

        return Operation("acquire", check_free, take)

    def _check_free(
        self, run_id: str, *, take_dead: bool
    ) -> tuple[int, bool, tuple[str, int] | None]:
        """Raise ``LeaseHeldError`` while a live lease holds the run (its holder,
        epoch and ``retry_after_ms``, L12); else the store's now, whether a lease
        row is there (taking it is a takeover), and with ``take_dead`` a live
        lease whose holder is provably dead as ``(owner, epoch)`` (L11).

        Inside the write transaction, so no other connection changes the row
        before the caller takes it.
        """
        now = self._now()
        rows = self._cursor.execute(sql.LEASE_ROW, (run_id,)).fetchall()
        if rows and rows[0][2] > now:  # type: ignore[operator]  # INTEGER column
            holder, epoch, expires_at = rows[0]
            assert isinstance(holder, str)
            assert isinstance(epoch, int)
            assert isinstance(expires_at, int)
            refuse_if_moved(run_id, holder, epoch)  # V4: a tombstone is never taken
            if take_dead and self._holder_is_dead(run_id, epoch):
                return now, True, (holder, epoch)
            raise held_by(run_id, holder, epoch, expires_at - now)
        return now, bool(rows), None

    def in_brief_lease(self, run_id: str, owner: str, work: BriefWork[T]) -> T:
        """``acquire``, ``work(lease, journal, blobs)``, ``release``: ONE transaction.

        The work's reads and writes run inside the transaction (``_brief.Inside``),
        every write under the brief lease. Refused while another lease is live
        (``LeaseHeldError``, nothing done), unless its holder is provably dead
        (L11: taken over, as acquire does); the epoch moves as an acquire's does,
        so every earlier lease stays powerless; the run has no lease row after.
        All or nothing: an error of the work rolls everything back and is raised.
        """
        return self._door.submit(self._brief_op(run_id, owner, work))

    def _brief_op(self, run_id: str, owner: str, work: BriefWork[T]) -> Operation[T]:
        def check_free() -> tuple[int, tuple[str, int] | None]:
            now, _, dead = self._check_free(run_id, take_dead=True)
            return now, dead

        return brief_lease_op(
            run_id,
            owner,
            check_free,
            self.lease_ttl_ms,
            self._assert_fencing,
            work,
        )

    def brief_put(
        self,
        owner: str,
        ref: str,
        blob: BlobInput,
        under: str,
        tail: str,
        meta: RunMeta | None = None,
        meta_replaces: bool = True,
        need_prior: bool = False,
    ) -> bool:
        """One blob put under a brief lease of ``owner``, in ONE transaction (L16).

        ``in_brief_lease`` with a fixed work (``_brief_put``): acquire's
        refusal and takeover, the epoch bump over a replaced lease row (none
        without one), the put, and ``meta`` where no ref was prior, then
        release. A ref counts as prior when it starts
        with ``under`` (a prefix of the blob's run) and its rest matches the
        regular expression ``tail``. ``need_prior``: with none prior, nothing
        is written and the call returns ``False``; otherwise ``True``.
        ``meta_replaces=False`` writes the meta only where the run has none.

        Raises:
            InvalidArgumentError: an argument breaks a ``_brief_put`` rule.
            LeaseHeldError: another lease is live (holder, epoch, retry_after_ms).
        """
        put = brief_put_args(owner, ref, blob, under, tail, meta)
        return self._door.submit(self._brief_put_op(put, meta_replaces, need_prior))

    def _brief_put_op(
        self, put: BriefPutArgs, meta_replaces: bool, need_prior: bool
    ) -> Operation[bool]:
        return brief_put_op(
            put,
            lambda: self._check_free(put.run_id, take_dead=True)[1],
            meta_replaces,
            need_prior,
        )

    def _holder_is_dead(self, run_id: str, epoch: int) -> bool:
        """L11: the process that took ``epoch`` provably no longer runs.

        No row for that epoch (a lease the reference or an older version took),
        or a process this host cannot judge, reads as alive.
        """
        try:
            rows = self._cursor.execute(sql.HOLDER_OF, (run_id, epoch)).fetchall()
        except apsw.SQLError:
            return False  # a file without our table: nobody recorded holders
        return bool(rows) and holder_is_dead(rows[0][0])

    @staticmethod
    def _record_holder(cursor: apsw.Cursor, run_id: str, epoch: int) -> None:
        """Record this process as the holder of ``epoch`` (L11), in the take's transaction."""
        process = this_process()
        if process is None:
            cursor.execute(sql.FORGET_HOLDER, (run_id,))
        else:
            cursor.execute(sql.RECORD_HOLDER, (run_id, epoch, process))

    def renew(self, lease: Lease) -> None:
        """Extend the live lease to ``now + ttl`` (L8), pinned by owner and epoch.

        Raises:
            LeaseHeldError: the lease is not live (released, expired, superseded).
        """
        self._door.submit(self._renew_op(lease))

    def _renew_op(self, lease: Lease) -> Operation[None]:
        """The operation of ``renew``: checked arguments, fence, mutation."""
        _intake.require_lease(lease, "renew")

        def extend(cursor: apsw.Cursor) -> None:
            cursor.execute(
                sql.RENEW_LEASE,
                (
                    self._now() + self.lease_ttl_ms,
                    lease.run_id,
                    lease.owner,
                    lease.epoch,
                ),
            )

        return Operation("renew", self._fence(lease), extend, atomic=True)

    def release(self, lease: Lease) -> None:
        """Give up the live lease; its epoch can never write again (L6).

        Raises:
            LeaseHeldError: the lease is not live.
        """
        self._door.submit(self._release_op(lease))

    # -- fused writes: two writes of one run, one transaction ----------------------

    def put_meta_and_release(self, meta: RunMeta, lease: Lease) -> None:
        """``put_meta(meta, lease)`` then ``release(lease)``, in ONE transaction.

        One fence check and one commit where the two calls take two: how a
        LangGraph hold ends, writing its outcome. All or nothing: a lease that
        is not live refuses both, a meta that cannot be stored keeps the lease.

        Raises:
            InvalidArgumentError: meta is not a dict with a valid ``runId``.
            LeaseHeldError: the lease names another run or is not live.
            NotJsonError: the meta is not JSON.
        """
        self._door.submit(self._put_meta_and_release_op(meta, lease))

    def _put_meta_and_release_op(self, meta: RunMeta, lease: Lease) -> Operation[None]:
        _intake.require_lease(lease, "put_meta_and_release")
        run_id, text = _intake.meta_text(meta)
        check_run_match(lease, run_id, "put_meta_and_release")

        def both(cursor: apsw.Cursor) -> None:
            cursor.execute(sql.UPSERT_META, (run_id, text))
            cursor.execute(sql.RELEASE_LEASE, (run_id, lease.owner, lease.epoch))

        return Operation("put_meta_and_release", self._fence(lease), both)

    def put_with_meta(
        self,
        ref: str,
        blob: bytes | bytearray | memoryview,
        meta: RunMeta,
        lease: Lease,
    ) -> None:
        """The blob twin's ``put(ref, blob, lease)`` and ``put_meta(meta, lease)``, in ONE transaction.

        How a LangGraph thread's first checkpoint and its meta land: one commit
        where two calls take two. All or nothing, under one fence check.

        Raises:
            InvalidArgumentError: a bad ref, blob, meta or lease, or the ref
                and the meta of different runs.
            LeaseHeldError: the lease names another run or is not live.
            NotJsonError: the meta is not JSON.
        """
        self._door.submit(self._put_with_meta_op(ref, blob, meta, lease))

    def _put_with_meta_op(
        self,
        ref: str,
        blob: bytes | bytearray | memoryview,
        meta: RunMeta,
        lease: Lease,
    ) -> Operation[None]:
        _intake.require_lease(lease, "put_with_meta")
        ref, blob_run = _intake.ref_for_write(ref, "put_with_meta")
        run_id, text = _intake.meta_text(meta)
        check_run_match(lease, blob_run, "put_with_meta")
        check_run_match(lease, run_id, "put_with_meta")
        data = _intake.blob_bytes(blob, "put_with_meta")  # copied now (D3)

        def both(cursor: apsw.Cursor) -> None:
            cursor.execute(sql.UPSERT_BLOB, (ref, run_id, data))
            cursor.execute(sql.UPSERT_META, (run_id, text))

        return Operation("put_with_meta", self._fence(lease), both)

    def _release_op(self, lease: Lease) -> Operation[None]:
        """The operation of ``release``: checked arguments, fence, mutation."""
        _intake.require_lease(lease, "release")
        return Operation(
            "release",
            self._fence(lease),
            one_statement(sql.RELEASE_LEASE, (lease.run_id, lease.owner, lease.epoch)),
            atomic=True,
        )


def _not_above_tail(run_id: str, seq: int | float) -> JournalOrderViolation:
    return JournalOrderViolation(
        f"append to run {run_id!r}: seq {seq} is not above the stored tail",
        run_id,
        seq,
    )
