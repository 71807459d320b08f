"""PostgresStore: journals, metas, leases, epochs and blobs in one PostgreSQL schema.

Each run-scoped mutation is one call of a server-side function (see
``_schema``): advisory transaction lock of the run, fence check, guarded
mutation, commit, all in one statement on an autocommit connection, so one
round trip and one transaction (P4, L7). Reads are single statements. The
Python side of every mutation goes through ``PostgresStore._mutate``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from decimal import Decimal
from typing import Any, Final, Literal, final

import psycopg
from psycopg import generators, pq
from psycopg.rows import scalar_row

from rulvar_store import (
    Clock,
    JournalEntry,
    JournalTail,
    Lease,
    RunFilter,
    RunMeta,
)
from rulvar_store import backend as _intake
from rulvar_store.backend import (
    armed,
    check_run_match,
    finite_seq,
    hit,
    load_record,
    load_records,
    meta_matches_filter,
    not_live_lease,
    parse_cursor,
)
from rulvar_store.errors import (
    JournalOrderViolation,
    LeaseHeldError,
    StoreBusyError,
    StoreClosedError,
    StoreUnavailableError,
)
from rulvar_store.ops import LeaseState
from rulvar_store_postgres._config import resolve_settings
from rulvar_store_postgres._errors import (
    RETRYABLE_SQLSTATES,
    SCHEMA_GONE_SQLSTATES,
    sqlstate_of,
    translated,
)
from rulvar_store_postgres._pool import Conn, make_pool
from rulvar_store_postgres._schema import STATUS_HELD, STATUS_OK, STATUS_ORDER, Sql
from rulvar_store_postgres._transcripts import PostgresFencedTranscriptStore

__all__ = ["PostgresStore"]

# 40001/40P01 roll the whole transaction back; retry it this many more times.
_SERIALIZATION_RETRIES: Final = 3
# The boot waits this long (at least) for other processes booting the same schema.
_BOOT_LOCK_TIMEOUT_MS: Final = 30_000


def _numeric(seq: float | None) -> Decimal | None:
    """A finite seq (D5) as an exact numeric: the same number its JSON text says."""
    if seq is None:
        return None
    return Decimal(repr(seq)) if isinstance(seq, float) else Decimal(seq)


def _commit_with_failpoint(conn: Conn, operation: str) -> None:
    """COMMIT in two halves with ``after-send`` between: sent, reply not yet read.

    A client that dies at ``after-send`` leaves the outcome to the server alone
    (the kill points read it back from the store). psycopg has no public
    "send only" call, so the COMMIT goes through its libpq connection and its
    wait loop; the reply is checked like any statement's.
    """
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(b"COMMIT")
        conn.wait(generators.send(pgconn))
    try:
        hit(operation, "after-send")
    except BaseException:
        # A hook that raises (a test's fault) still leaves a clean connection:
        # the COMMIT's reply is read before the error goes up.
        with suppress(psycopg.Error), conn.lock:
            conn.wait(generators.fetch_many(pgconn))
        raise
    with conn.lock:
        results = conn.wait(generators.fetch_many(pgconn))
    for result in results:
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


@final
class PostgresStore:
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
    - ``readonly`` (False): for observers. No boot (no schema, table or
      function is created; the schema must already hold a store) and every
      session is ``default_transaction_read_only``, so the server refuses
      writes; works with a role that has only USAGE and SELECT.

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

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        ttl_ms: int | None = None,
        pool_max_size: int | None = None,
        max_size: int | None = None,
        now: Clock | None = None,
        lock_timeout_ms: int | None = None,
        idle_in_transaction_timeout_ms: int | None = None,
        connect_timeout_s: int | None = None,
        readonly: bool | None = None,
    ) -> None:
        settings = resolve_settings(
            url,
            {
                "schema": schema,
                "ttl_ms": ttl_ms,
                "pool_max_size": pool_max_size,
                "max_size": max_size,
                "lock_timeout_ms": lock_timeout_ms,
                "idle_in_transaction_timeout_ms": idle_in_transaction_timeout_ms,
                "connect_timeout_s": connect_timeout_s,
                "readonly": readonly,
            },
            injected_clock=now is not None,
        )
        self._settings = settings
        self.schema: Final = settings.schema
        self.lease_ttl_ms: Final = settings.ttl_ms
        self.pool_max_size: Final = settings.pool_max_size
        self.lock_timeout_ms: Final = settings.lock_timeout_ms
        self.idle_in_transaction_timeout_ms: Final = (
            settings.idle_in_transaction_timeout_ms
        )
        self._now = now
        self._sql = Sql(settings.schema)
        self._pool = make_pool(
            settings.conninfo,
            max_size=settings.pool_max_size,
            lock_timeout_ms=settings.lock_timeout_ms,
            idle_in_transaction_timeout_ms=settings.idle_in_transaction_timeout_ms,
            connect_timeout_s=settings.connect_timeout_s,
            name=f"rulvar-{settings.schema}",
            readonly=settings.readonly,
        )
        self._state_lock = threading.Lock()
        self._booted = False
        self._closed = False
        self._twin: PostgresFencedTranscriptStore | None = None

    def __repr__(self) -> str:
        return f"PostgresStore({self._settings.where})"

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
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _ensure_booted(self, operation: str) -> None:
        """Create the schema's objects once per instance, under the boot lock (P3).

        Lazy and memoized; a failed boot leaves the memo unset so the next call
        boots again. The whole boot is one round trip (see ``Sql.boot``).
        """
        if self._booted:
            return
        with self._state_lock:
            if self._closed:
                raise StoreClosedError(
                    f"{operation} on {self._settings.where}: the store is closed",
                    operation,
                )
            if self._booted is False:  # another thread may have booted meanwhile
                boot = (
                    "SET LOCAL lock_timeout = "
                    f"{max(_BOOT_LOCK_TIMEOUT_MS, self.lock_timeout_ms)};"
                    + self._sql.boot
                )
                with translated("boot", self._settings.where, self._settings.secrets):
                    self._pool.open()
                    if not self._settings.readonly:
                        with self._pool.checkout() as conn:
                            conn.execute(boot)
                self._booted = True

    # -- the one transaction path ----------------------------------------------

    def _mutate(
        self,
        operation: str,
        call: str,
        args: Sequence[Any],
        run_id: str,
        owner: str | None,
        epoch: int | None,
        now: int | None,
    ) -> int:
        """Run one run-scoped mutation as ONE transaction and return its result.

        Normally the transaction is a single statement, the operation's server
        function: lock the run, fence check, guarded mutation, commit. When a
        failpoint hook is installed (tests, kill points) the same function runs
        inside an explicit transaction so every failpoint is a real moment:
        ``after-begin`` (BEGIN sent), ``after-fence-check`` (the run's lock is held
        and the fence evaluated via ``rulvar_py_fence``), ``before-commit`` (the
        mutation is done, uncommitted), ``after-commit``. The function re-checks
        the fence under the same lock, so both paths decide identically.
        Serialization failures and deadlocks are retried whole a few times.
        """
        self._ensure_booted(operation)
        where, secrets = self._settings.where, self._settings.secrets
        attempt = 0
        while True:
            traced = armed()
            try:
                with (
                    translated(operation, where, secrets),
                    self._pool.checkout() as conn,
                ):
                    if not traced:
                        row = conn.execute(call, args).fetchone()
                    else:
                        row = self._mutate_with_failpoints(
                            conn, operation, call, args, (run_id, owner, epoch, now)
                        )
                if row is None or row[0] is None:  # pragma: no cover - never NULL
                    raise StoreUnavailableError(f"{operation} on {where}: no result")
                result = int(row[0])
            except StoreBusyError as exc:
                if (
                    sqlstate_of(exc.__cause__) in RETRYABLE_SQLSTATES
                    and attempt < _SERIALIZATION_RETRIES
                ):
                    attempt += 1
                    time.sleep(0.002 * attempt)
                    continue
                raise
            except StoreUnavailableError as exc:
                if sqlstate_of(exc.__cause__) in SCHEMA_GONE_SQLSTATES:
                    self._booted = False  # the schema was dropped: boot again next time
                raise
            if traced:
                # Outside the retry and translation: whatever a hook does after the
                # commit can never re-run the committed transaction.
                hit(operation, "after-commit")
            return result

    def _mutate_with_failpoints(
        self,
        conn: Conn,
        operation: str,
        call: str,
        args: Sequence[Any],
        fence_args: tuple[str, str | None, int | None, int | None],
    ) -> tuple[Any, ...] | None:
        conn.execute("BEGIN")
        try:
            hit(operation, "after-begin")
            self._assert_fencing(conn, fence_args)
            hit(operation, "after-fence-check")
            row = conn.execute(call, args).fetchone()
            hit(operation, "before-commit")
        except BaseException:
            # A lost connection must not hide the error that ended the transaction.
            with suppress(psycopg.Error):
                conn.rollback()
            raise
        _commit_with_failpoint(conn, operation)
        return row

    def _assert_fencing(
        self, conn: Conn, fence_args: tuple[str, str | None, int | None, int | None]
    ) -> None:
        """Take the run's lock and evaluate the fence inside the open transaction.

        The Q13 seam of the failpoint path. It deliberately does not raise on a
        dead lease: the operation function re-checks under the same lock and its
        status decides, so both paths share one verdict.
        """
        conn.execute(self._sql.fence, fence_args).fetchone()

    def _query(
        self, operation: str, statement: str, args: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """Run one read statement (its own transaction) and return all rows."""
        self._ensure_booted(operation)
        with (
            translated(operation, self._settings.where, self._settings.secrets),
            self._pool.checkout() as conn,
        ):
            return conn.execute(statement, args).fetchall()

    def _query_payloads(
        self, operation: str, statement: str, args: Sequence[Any]
    ) -> list[str]:
        """Run a one-column read and return the bare values (no tuple per row)."""
        self._ensure_booted(operation)
        with (
            translated(operation, self._settings.where, self._settings.secrets),
            self._pool.checkout() as conn,
            conn.cursor(row_factory=scalar_row) as cursor,
        ):
            return cursor.execute(statement, args).fetchall()

    def _clock(self) -> int | None:
        """The injected clock's reading, or ``None``: the server's clock decides."""
        return None if self._now is None else int(self._now())

    def _fenced(
        self,
        operation: str,
        call: str,
        head: Sequence[Any],
        run_id: str,
        lease: Lease | None,
    ) -> int:
        """Run a fenced mutation whose arguments are ``head + (owner, epoch, now)``.

        Raises ``LeaseHeldError`` when a presented lease is not live; returns the
        status otherwise (``STATUS_ORDER`` is left to the caller).
        """
        owner = None if lease is None else lease.owner
        epoch = None if lease is None else lease.epoch
        now = self._clock()
        status = self._mutate(
            operation, call, (*head, owner, epoch, now), run_id, owner, epoch, now
        )
        if status == STATUS_HELD and lease is not None:
            raise not_live_lease(operation, lease)
        return status

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
        _intake.run_id_for_write(run_id, "append")
        text = _intake.entry_text(entry)
        _intake.numeric_seq(entry)
        lease = _intake.lease_or_none(lease, "append")
        check_run_match(lease, run_id, "append")
        seq = finite_seq(entry)
        status = self._fenced(
            "append", self._sql.append, (run_id, text, _numeric(seq)), run_id, lease
        )
        if status == STATUS_ORDER:
            raise JournalOrderViolation(
                f"append to run {run_id!r}: seq {seq} is not above the stored tail",
                run_id,
                seq,
            )

    def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's entries in append order (J2); ``[]`` when unknown (J5)."""
        _intake.run_id_for_read(run_id, "load")
        return load_records(self._query_payloads("load", self._sql.load, (run_id,)))

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the entries appended after ``cursor`` (O(new entries); ``_incremental``).

        The cursor is the id of the last entry returned. Within one run, ids
        follow commit order (every append holds the run's advisory lock, P4),
        and a sequence never reuses an id, so a cursor whose entry is gone
        means the run was deleted since: the read then starts over.
        """
        _intake.run_id_for_read(run_id, "load_since")
        anchor = parse_cursor(cursor, "postgresql", 1)
        after = 0 if anchor is None else anchor[0]
        statement = (
            "SELECT id, CASE WHEN id = %s THEN NULL ELSE payload END "
            f"FROM {self._sql.quoted}.rulvar_entries "
            "WHERE run_id = %s AND id >= %s ORDER BY id"
        )
        rows = self._query("load_since", statement, (after, run_id, after))
        restarted = after > 0 and (not rows or rows[0][0] != after)
        if restarted:
            after = 0
            rows = self._query("load_since", statement, (0, run_id, 0))
        last = int(rows[-1][0]) if rows else after
        payloads = [row[1] for row in rows if row[0] != after]
        return JournalTail(load_records(payloads), f"postgresql:{last}", restarted)

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the run's whole meta record (M2); fenced when leased (F1)."""
        run_id, text = _intake.meta_text(meta)
        lease = _intake.lease_or_none(lease, "put_meta")
        check_run_match(lease, run_id, "put_meta")
        self._fenced("put_meta", self._sql.put_meta, (run_id, text), run_id, lease)

    def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` (M5)."""
        _intake.run_id_for_read(run_id, "get_meta")
        rows = self._query_payloads("get_meta", self._sql.get_meta, (run_id,))
        if not rows:
            return None
        meta: RunMeta = load_record(rows[0])
        return meta

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return matching metas ordered by run id; status and name narrow in SQL (M4)."""
        run_filter = _intake.run_filter(run_filter)
        clauses: list[str] = []
        args: list[Any] = []
        if run_filter is not None:
            if run_filter.status is not None or run_filter.statuses is not None:
                wanted = [run_filter.status] if run_filter.status is not None else []
                wanted += list(run_filter.statuses or ())
                if not wanted:
                    return []
                if all(isinstance(value, str) for value in wanted):
                    clauses.append(f"{self._sql.meta_status} = ANY(%s)")
                    args.append(wanted)
            if isinstance(run_filter.name, str):
                clauses.append(f"{self._sql.meta_name} = %s")
                args.append(run_filter.name)
        statement = self._sql.list_runs
        if clauses:
            statement += " WHERE " + " AND ".join(clauses)
        statement += ' ORDER BY run_id COLLATE "C"'
        metas = load_records(self._query_payloads("list_runs", statement, args))
        return [meta for meta in metas if meta_matches_filter(meta, run_filter)]

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove entries, meta and lease row together; the epoch stays (M6, L5)."""
        _intake.run_id_for_read(run_id, "delete")
        lease = _intake.lease_or_none(lease, "delete")
        check_run_match(lease, run_id, "delete")
        self._fenced("delete", self._sql.delete, (run_id,), run_id, lease)

    # -- operator reads (rulvar_store._observe) --------------------------------

    def meta_page(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """Return up to ``limit`` (run id, meta text) pairs after ``after``, by run id.

        Unparsed, so a malformed row is the caller's diagnostic, not a failed page.
        """
        table = f"{self._sql.quoted}.rulvar_meta"
        order = 'ORDER BY run_id COLLATE "C" LIMIT %s'
        if after is None:
            rows = self._query(
                "meta_page", f"SELECT run_id, payload FROM {table} {order}", (limit,)
            )
        else:
            _intake.text_for_read(after, "meta_page", "after")
            rows = self._query(
                "meta_page",
                f'SELECT run_id, payload FROM {table} WHERE run_id COLLATE "C" > %s '
                + order,
                (after, limit),
            )
        return [(str(row[0]), str(row[1])) for row in rows]

    def peek_lease(self, run_id: str) -> LeaseState | None:
        """Return the run's lease row and the lease clock's reading; takes nothing."""
        _intake.run_id_for_read(run_id, "peek_lease")
        clock = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        rows = self._query(
            "peek_lease",
            f"SELECT owner, epoch, expires_at, coalesce(%s::bigint, {clock}) "
            f"FROM {self._sql.quoted}.rulvar_leases WHERE run_id = %s",
            (self._clock(), run_id),
        )
        if not rows:
            return None
        owner, epoch, expires_at, now = rows[0]
        return LeaseState(run_id, str(owner), int(epoch), int(expires_at), int(now))

    # -- leases ----------------------------------------------------------------

    def acquire(self, run_id: str, owner: str) -> Lease:
        """Take the run's lease with the next epoch (L1-L3), on the lease clock."""
        _intake.run_id_for_write(run_id, "acquire")
        _intake.owner_for_write(owner, "acquire")
        now = self._clock()
        epoch = self._mutate(
            "acquire",
            self._sql.acquire,
            (run_id, owner, self.lease_ttl_ms, now),
            run_id,
            None,
            None,
            now,
        )
        if epoch <= 0:
            # The holder's owner is not returned (the call stays a scalar); its
            # epoch is.
            raise LeaseHeldError(
                f"run {run_id!r} is leased (live lease at epoch {-epoch})",
                run_id,
                None,
                -epoch,
            )
        return Lease(run_id, owner, epoch)

    def renew(self, lease: Lease) -> None:
        """Extend a live lease to now + ttl (L8); a dead one raises (L6)."""
        _intake.require_lease(lease, "renew")
        now = self._clock()
        status = self._mutate(
            "renew",
            self._sql.renew,
            (lease.run_id, lease.owner, lease.epoch, self.lease_ttl_ms, now),
            lease.run_id,
            lease.owner,
            lease.epoch,
            now,
        )
        if status != STATUS_OK:
            raise not_live_lease("renew", lease)

    def release(self, lease: Lease) -> None:
        """Give a live lease up; a dead one raises (L6). The epoch stays (L4)."""
        _intake.require_lease(lease, "release")
        now = self._clock()
        status = self._mutate(
            "release",
            self._sql.release,
            (lease.run_id, lease.owner, lease.epoch, now),
            lease.run_id,
            lease.owner,
            lease.epoch,
            now,
        )
        if status != STATUS_OK:
            raise not_live_lease("release", lease)
