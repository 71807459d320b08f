"""PostgresStore: journals, metas, leases, epochs and blobs in one PostgreSQL schema.

Each run-scoped mutation is one call of a server-side function (see
``_schema``): advisory transaction lock of the run, fence check, guarded
mutation, commit, all in one statement on an autocommit connection, so one
round trip and one transaction (P4, L7), hook or no hook (``_transaction``).
Reads are single statements. Every SQL text comes from ``_schema``; the Python
side of every mutation goes through ``PostgresStore._mutate``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeVar, final

from rulvar_store import (
    BlobInput,
    JournalEntry,
    JournalTail,
    Lease,
    RunFilter,
    RunMeta,
)
from rulvar_store.backend import DurabilityReport, Observed, hit, instrumented
from rulvar_store.errors import StoreBusyError, StoreUnavailableError
from rulvar_store.ops import LeaseState
from rulvar_store_postgres import _move_rows
from rulvar_store_postgres._acquire_read import acquire_with_last_ref
from rulvar_store_postgres._brief import OPERATION as OPERATION_BRIEF
from rulvar_store_postgres._brief import BriefWork, Frame, WorkStarted, run_brief
from rulvar_store_postgres._config import Settings
from rulvar_store_postgres._errors import mutation_result, translated
from rulvar_store_postgres._handle import PostgresHandle
from rulvar_store_postgres._interrupts import interrupts_deferred
from rulvar_store_postgres._last_ref import learn_collation
from rulvar_store_postgres._liveness import liveness_key
from rulvar_store_postgres._plans import READ_ROWS, Step
from rulvar_store_postgres._pool import Conn, make_pool
from rulvar_store_postgres._primary import PROBE, ServerState
from rulvar_store_postgres._reads import read_prepared, warm_reads
from rulvar_store_postgres._telemetry_target import pool_figures, postgres_target
from rulvar_store_postgres._transaction import run_mutation
from rulvar_store_postgres._transcripts import PostgresFencedTranscriptStore

__all__ = ["PostgresStore"]

T = TypeVar("T")

# synchronous_commit first, then the columns of ``_primary.PROBE``.
DURABILITY: Final = PROBE.replace(
    "SELECT ", "SELECT current_setting('synchronous_commit'), ", 1
)


@final
@instrumented(
    lambda store: postgres_target(store._settings.conninfo, store.schema),
    role="journal",
)
class PostgresStore(PostgresHandle, Observed):
    """Fenced, leasable, meta-lookup journal store in a PostgreSQL schema.

    ``url`` is a ``postgresql://`` (or ``postgres://``) URL or a libpq
    ``key=value`` string. Options may also ride in the URL's query string
    (``?schema=tenant_a&ttl_ms=30000``); keyword arguments win. ``None`` means
    the default:

    - ``schema`` (``"public"``): all five tables live in it, created if missing.
    - ``ttl_ms`` (60 000): lease ttl (D9).
    - ``pool_max_size`` (10, alias ``max_size``): connections of this store's pool.
    - ``lock_timeout_ms`` (ttl/4, at most 5 s): a wait for a run's lock past it
      raises the retryable ``StoreBusyError``.
    - ``idle_in_transaction_timeout_ms`` (ttl/2, at most 10 s; must be below the
      ttl): a client paused inside a transaction loses its session, and its
      locks, before its lease can expire, so it cannot block a takeover.
      (With an injected ``now`` the ttl is test time, not real time: both
      timeouts then default to their caps and are not compared with it.)
    - ``connect_timeout_s`` (5).
    - ``call_timeout_ms`` (ttl/2, at most 10 s, at least ``lock_timeout_ms`` + 1 s;
      must be above ``lock_timeout_ms``): bounds the wait for a pooled connection
      and then the statement; past it the connection is cut and discarded and the
      call raises the retryable ``StoreUnavailableError`` (P13, ``_deadline``).
    - ``readonly`` (False): for observers. No boot (no schema, table or
      function is created; the schema must already hold a store, else the
      first call raises ``ConfigError``) and every
      session is ``default_transaction_read_only``, so the server refuses
      writes; works with a role that has only USAGE and SELECT.
    - ``replication`` (``"any"``): ``"required"`` refuses, with ``ConfigError``,
      to write through a server whose acknowledged commits a failover can
      take back (asynchronous replication); ``durability()`` reports the mode
      either way (P20).

    Several hosts (``postgresql://u@h1:5432,h2:5432/db``, ``?host=h1,h2``) are
    tried in order, standbys passed over (``target_session_attrs=read-write``
    unless the URL says otherwise), 2 s per host; a host found read-only,
    superseded or stalled is tried last from then on (``_primary``, P16-P19).

    Clock (P5): lease expiry uses the DATABASE SERVER's clock
    (``clock_timestamp()`` in Unix ms), read inside the locked transaction, so
    every host compares against one clock and client skew can neither shorten
    nor stretch a lease. ``now`` (tests) overrides it: its value is passed as a
    parameter of each lease-time decision. Safety never rests on a clock; the
    epoch alone fences.

    Nothing connects until the first call (lazy boot, P3). Thread-safe; use as a
    context manager or call ``close()``, which closes the ``transcripts()`` twin
    and drains the pool.

    Raises:
        ConfigError: bad URL or option (P1), before any connection.
    """

    fenced_writes: Literal[True] = True

    def _start(self, settings: Settings) -> None:
        self._pool = make_pool(settings, f"rulvar-{settings.schema}", self._ready)
        self._state_lock = threading.Lock()
        self._twin: PostgresFencedTranscriptStore | None = None

    # -- lifecycle -------------------------------------------------------------

    def transcripts(self) -> PostgresFencedTranscriptStore:
        """Return the memoized fenced blob twin: same pool, same fence (T6, T7)."""
        with self._state_lock:
            if self._twin is None:
                self._twin = PostgresFencedTranscriptStore(self)
            return self._twin

    def close(self) -> None:
        """Close the twin and drain the pool; later calls raise ``ContractError``."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            twin = self._twin
        if twin is not None:
            twin._mark_closed()
        if self._fork.forked:
            return  # the pool's sockets are the parent's: leave them alone
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _ensure_booted(self, operation: str) -> None:
        """Create the schema's objects once per instance, under the boot lock (P3).

        Lazy and memoized; a failed boot leaves the memo unset so the next call
        boots again. A schema already booted costs one plain query
        (``Sql.booted``); otherwise the whole boot follows as one more round trip
        (``Sql.boot``).
        """
        if self._booted:
            return
        with self._state_lock:
            self._refuse_if_closed(operation)
            if self._booted is False:  # another thread may have booted meanwhile
                boot = self._boot_statement()
                with translated("boot", self._settings.where, self._settings.secrets):
                    self._pool.open()
                    # The boot may wait for another process's boot that long.
                    with self._pool.checkout(self._boot_wait_s()) as conn:
                        if not self._settings.readonly:
                            row = conn.execute(self._sql.booted).fetchone()
                            if row is None or row[0] is not True:
                                conn.execute(boot)
                            present = True
                        else:
                            row = conn.execute(self._sql.store_present).fetchone()
                            present = row is not None and row[0] is True
                        if present:  # last_ref's plan, on the boot's connection
                            learn_collation(conn, self._plans)
                            # The next call gets this connection back (LIFO).
                            warm_reads(conn, self._reads, self._plans.refs_bytewise)
                self._booted_if_present(present, operation)

    def _ready(self, conn: Conn) -> None:
        """Ready a new pooled connection's hot reads (``_reads``) once the schema is booted.

        Runs in the pool's worker, before the connection serves a call; the
        connections made before the boot are readied by it or on first use.
        """
        if self._booted and self._reads:
            warm_reads(conn, self._reads, self._plans.refs_bytewise)

    # -- the one transaction path ----------------------------------------------

    def _mutate(self, operation: str, call: str, args: Sequence[Any]) -> int:
        """Run one run-scoped mutation as ONE transaction and return its result.

        The transaction is one call of the operation's server function (lock
        the run, fence check, guarded mutation), the same with or without a
        failpoint hook (``_transaction``). Serialization failures and deadlocks
        roll the whole call back and are retried whole a few times.
        """
        self._ensure_booted(operation)
        where, secrets = self._settings.where, self._settings.secrets
        attempt = 0
        while True:
            try:
                with (
                    translated(operation, where, secrets),
                    self._pool.checkout() as conn,
                ):
                    row = run_mutation(
                        conn, operation, call, args, self._prepared.get(call)
                    )
                result = mutation_result(row, operation, where)
            except StoreBusyError as exc:
                time.sleep(self._busy_delay(exc, attempt))
                attempt += 1
                continue
            except StoreUnavailableError as exc:
                self._note_unavailable(exc)
                raise
            # Outside the retry and translation: whatever a hook does after the
            # commit can never re-run the committed transaction.
            hit(operation, "after-commit")
            return result

    def _read(self, step: Step[Any]) -> Any:
        """Run one read statement (its own transaction) and return its rows."""
        self._ensure_booted(step.operation)
        prepared = self._reads.get(step.statement)
        with (
            translated(step.operation, self._settings.where, self._settings.secrets),
            self._pool.checkout() as conn,
        ):
            if prepared is not None:
                return read_prepared(conn, prepared, step.args, step.kind)
            with conn.cursor(row_factory=READ_ROWS[step.kind]) as cursor:
                return cursor.execute(step.statement, step.args).fetchall()

    def _run(self, step: Step[T]) -> T:
        """Execute a plan (``_plans``) step by step and return its value.

        Raises:
            ForkedStoreError: this handle was opened before a fork; nothing of
                the parent's connections is touched.
        """
        self._fork.check(step.operation)
        # A signal waits for the call's end: no connection is lost to it (P12).
        with interrupts_deferred():
            while True:
                if step.kind == "mutate":
                    answer: Any = self._mutate(
                        step.operation, step.statement, step.args
                    )
                elif step.kind == "none":
                    answer = None
                else:
                    answer = self._read(step)
                result = step.finish(answer)
                if not isinstance(result, Step):
                    return result
                step = result

    # -- journal ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append one entry; J7 order: run match, fence, then the J6 seq guard.

        Raises:
            InvalidArgumentError: a bad run id, entry or lease (``_intake`` rules),
                or a present, non-null seq that is not a JSON number (D5: the
                format casts seq to numeric); nothing is stored.
            NotJsonError: the entry is not JSON (D2).
        """
        self._run(self._plans.append(run_id, entry, lease))

    def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order (J2); ``[]`` when unknown (J5)."""
        return self._run(self._plans.load(run_id))

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` (O(new entries); ``_incremental``).

        The cursor is the id of the last entry returned. Within one run, ids
        follow commit order (every append holds the run's advisory lock, P4),
        and a sequence never reuses an id, so a cursor whose entry is gone
        means the run was deleted since: the read then starts over.
        """
        return self._run(self._plans.load_since(run_id, cursor))

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the run's whole meta record (M2); fenced when leased (F1)."""
        self._run(self._plans.put_meta(meta, lease))

    def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` (M5)."""
        return self._run(self._plans.get_meta(run_id))

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return matching metas ordered by run id; status and name narrow in SQL (M4)."""
        return self._run(self._plans.list_runs(run_filter))

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove entries, meta and lease row together; the epoch stays (M6, L5)."""
        self._run(self._plans.delete(run_id, lease))

    # -- operator reads (rulvar_store._observe) --------------------------------

    def meta_page(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Return up to ``limit`` (run id, meta text) pairs after ``after``, by run id.

        Unparsed, so a malformed row is the caller's diagnostic, not a failed page.
        """
        return self._run(self._plans.meta_page(after, limit))

    def peek_lease(self, run_id: str) -> LeaseState | None:
        """Return the run's lease row and the lease clock's reading; takes nothing."""
        return self._run(self._plans.peek_lease(run_id))

    def _telemetry_figures(self) -> dict[str, Any]:
        return pool_figures(self._pool)

    def durability(self) -> DurabilityReport:
        """``synchronous_commit`` as a pooled session of this store runs it.

        The store promises ``on`` (COMMIT returns once the WAL record is flushed);
        a server, database or role configured with ``off`` acknowledges commits
        a crash of the server can take back, and shows here. ``replication``
        tells ``async`` (a failover can lose acknowledged commits, epochs
        included) from ``sync`` and ``quorum``, read from the server's
        ``synchronous_standby_names`` and ``pg_stat_replication`` (P20).
        """
        rows = self._read(Step("durability", "rows", DURABILITY, (), lambda v: v))
        state = ServerState.from_row(tuple(rows[0][1:]))
        return DurabilityReport(
            "synchronous_commit",
            "on",
            str(rows[0][0]),
            replication=state.mode,
            detail=state.describe(),
        )

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
        """Entry texts (by COPY), meta text and an epoch floor in one fenced transaction."""
        _move_rows.write_rows(
            self, run_id, lease, expected_entries, entries, meta, epoch, blobs, durable
        )

    def orphan_page(self, kind: str, after: str | None, limit: int) -> list[str]:
        """Run ids after ``after`` of orphan journals or blobs (``_orphans``)."""
        return _move_rows.orphan_page(self, kind, after, limit)

    def write_runs(
        self,
        items: Sequence[
            tuple[str, Sequence[str], str | None, int, Sequence[tuple[str, bytes]]]
        ],
        *,
        durable: bool = True,
    ) -> None:
        """Several new runs in one transaction (``_move_rows.write_runs``)."""
        _move_rows.write_runs(self, items, durable)

    def flush_writes(self) -> None:
        """A durability barrier: every commit before it is flushed (``durable=False``)."""
        _move_rows.flush_writes(self)

    def fence_moved(self, lease: Lease, owner: str) -> int:
        """Turn the live ``lease`` into the moved-run tombstone (``_moved``)."""
        return _move_rows.fence_moved(self, lease, owner)

    # -- leases ----------------------------------------------------------------

    def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with the next epoch (L1-L3), on the lease clock.

        A live lease whose holder process provably died (its liveness session
        is gone, ``_liveness``) is taken over at once (L11).
        """
        settings = self._settings
        key = (
            None
            if settings.readonly
            else liveness_key(settings.conninfo, settings.connect_timeout_s)
        )
        return self._run(self._plans.acquire(run_id, owner, key))

    def renew(self, lease: Lease) -> None:
        """Extend a live lease to now + ttl (L8); a dead one raises (L6)."""
        self._run(self._plans.renew(lease))

    # -- fused writes (L14, L15) -----------------------------------------------

    def _liveness(self) -> int | None:
        settings = self._settings
        if settings.readonly:
            return None
        return liveness_key(settings.conninfo, settings.connect_timeout_s)

    def acquire_with_last_ref(
        self, run_id: str, owner: str, prefix: str
    ) -> tuple[Lease, str | None]:
        """``acquire`` and the blob twin's ``last_ref`` in ONE round trip (``_acquire_read``).

        The same two calls, pipelined on one connection: the acquire exactly
        as ``acquire`` (refusal, L11 takeover), then the read, after it.
        """
        return acquire_with_last_ref(self, run_id, owner, prefix)

    def in_brief_lease(self, run_id: str, owner: str, work: BriefWork[T]) -> T:
        """Acquire, ``work(lease, journal, blobs)`` and release in ONE transaction (L14).

        The acquire's own semantics (L1-L3, L11, L12): refused with
        ``LeaseHeldError`` naming the holder while another lease is live; an
        expired lease, or one whose holder provably died, is taken over and
        the epoch moves, fencing out every earlier lease. The work's reads and
        writes run inside the transaction (``_brief``), every write fenced by
        the brief lease. A failure anywhere, the work's own included, rolls
        all of it back. One commit; a busy run (its lock not free in time) is
        retried whole as long as the work has not started.
        """
        frame = Frame.of(self._plans, run_id, owner, self._liveness())
        self._fork.check(OPERATION_BRIEF)
        self._ensure_booted(OPERATION_BRIEF)
        where, secrets = self._settings.where, self._settings.secrets
        attempt = 0
        with interrupts_deferred():
            while True:
                started = WorkStarted()
                try:
                    with (
                        translated(OPERATION_BRIEF, where, secrets),
                        self._pool.checkout() as conn,
                    ):
                        result = run_brief(
                            conn, self._plans, frame, work, where, secrets, started
                        )
                except StoreBusyError as exc:
                    if started.started:
                        raise
                    time.sleep(self._busy_delay(exc, attempt))
                    attempt += 1
                    continue
                except StoreUnavailableError as exc:
                    self._note_unavailable(exc)
                    raise
                hit(OPERATION_BRIEF, "after-commit")
                return result

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
        """One blob put under a brief lease of ``owner``, as ONE call (L16).

        ``in_brief_lease`` with a fixed work, in one round trip: acquire (its
        refusal, takeover and epoch bump), the put, and ``meta`` where no ref
        was prior, then release. A ref counts as prior when it starts with
        ``under`` (a prefix of the blob's run) and its rest matches the POSIX
        regular expression ``tail``. ``need_prior``: with none prior, nothing
        is written and the call returns ``False``; otherwise ``True``.
        ``meta_replaces=False`` writes the meta only where the run has none.

        Raises:
            LeaseHeldError: another lease is live (holder, epoch, retry_after_ms).
        """
        step = self._plans.brief_put(
            owner, ref, blob, under, tail, meta, meta_replaces, need_prior
        )
        return self._run(step)

    def put_with_meta(
        self, ref: str, blob: BlobInput, meta: RunMeta, lease: Lease
    ) -> None:
        """A blob and its run's meta in ONE fenced transaction (L15): both or neither.

        A thread's first checkpoint and its meta. ``lease`` is required and
        must be live; the blob's run and the meta's run must be the lease's.
        """
        self._run(self._plans.put_with_meta(ref, blob, meta, lease))

    def put_meta_and_release(self, meta: RunMeta, lease: Lease) -> None:
        """Write the run's meta and release ``lease`` in ONE fenced transaction (L15).

        A hold's end: its outcome and its release. A lease that is not live
        changes nothing and raises ``LeaseHeldError``.
        """
        self._run(self._plans.put_meta_and_release(meta, lease))

    def release(self, lease: Lease) -> None:
        """Give a live lease up; a dead one raises (L6). The epoch stays (L4)."""
        self._run(self._plans.release(lease))
