"""The PostgreSQL format (CONTRACT Appendix P) and the server-side operations.

Everything a store sends to the server as DDL or as an operation call is built
here, from the schema name alone, so the format lives in one module:

* the five ``rulvar_*`` tables and their indexes, exactly as Appendix P fixes
  them (a test compares the created schema with the appendix's DDL run verbatim);
* the lock keys: ``hashtextextended('<schema>:<runId>', 8214)`` per run and
  ``hashtextextended('rulvar-boot:<schema>', 8214)`` for the boot, shared with
  the reference implementation so mixed fleets queue on the same locks;
* one PL/pgSQL function per run-scoped mutation (``rulvar_py_*``, the prefix
  Appendix S/P reserves for our own objects). Each takes the run's advisory
  transaction lock, checks the fence, performs the mutation with owner and
  epoch pinned, and returns one integer. Called as ONE statement on an
  autocommit connection, the call is its own transaction and one round trip:
  the fence adds no round trip over a bare insert.

Every operation function returns one integer status: ``0`` done; ``1`` the
presented lease is not the live lease; ``2`` the J6 seq guard refused the
append. ``rulvar_py_acquire`` returns the new epoch (> 0), or the live holder's
epoch negated when the run is held.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

__all__ = [
    "APPENDIX_P_INDEXES",
    "BEGIN",
    "COMMIT",
    "LOCK_SEED",
    "STATUS_HELD",
    "STATUS_OK",
    "STATUS_ORDER",
    "Sql",
    "boot_lock_key",
    "lock_call",
    "run_lock_key",
    "session_setup",
]

LOCK_SEED: Final = 8214
STATUS_OK: Final = 0
STATUS_HELD: Final = 1
STATUS_ORDER: Final = 2

# Appendix P indexes: name -> (table, the CREATE INDEX key list as written there).
APPENDIX_P_INDEXES: Final[dict[str, tuple[str, str]]] = {
    "rulvar_entries_by_run": ("rulvar_entries", "(run_id, id)"),
    "rulvar_entries_run_seq": (
        "rulvar_entries",
        "(run_id, ((payload::jsonb ->> 'seq')::numeric))",
    ),
    "rulvar_meta_by_status": ("rulvar_meta", "((payload::jsonb ->> 'status'))"),
    "rulvar_meta_by_name": ("rulvar_meta", "((payload::jsonb ->> 'name'))"),
    "rulvar_blobs_by_run": ("rulvar_blobs", "(run_id)"),
}


def run_lock_key(schema: str, run_id: str) -> str:
    """The text hashed into the per-run transaction lock (Appendix P)."""
    return f"{schema}:{run_id}"


def lock_call(schema: str) -> str:
    """The SQL expression that takes the run's transaction lock inside a function."""
    return f"pg_advisory_xact_lock(hashtextextended('{schema}:' || p_run, {LOCK_SEED}))"


def boot_lock_key(schema: str) -> str:
    """The text hashed into the boot transaction lock (Appendix P, P3)."""
    return f"rulvar-boot:{schema}"


# The lease clock: an injected `now` (p_now) wins, else the server's clock in Unix ms.
_NOW = "coalesce(p_now, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)"


@dataclass(frozen=True, slots=True)
class _Function:
    name: str
    args: str  # "name type, ..."
    body: str


def _functions(q: str, schema: str) -> tuple[_Function, ...]:
    """The operation functions of schema ``q`` (quoted) named ``schema``.

    The fence is written once (``lock`` and ``live`` below) and inlined into
    every operation, so the hot path runs no nested function call.
    """
    # The run's transaction lock (P4), then the lease clock, read after the lock
    # so a long wait cannot make the check use a stale time. One assignment: a
    # CASE evaluates its condition before its result, so the lock is held when
    # the clock is read, and PL/pgSQL evaluates a plain expression on its fast
    # path, where a PERFORM was a query of its own through SPI. (The lock
    # returns void, which is not NULL.)
    lock = f"t := CASE WHEN {lock_call(schema)} IS NOT NULL\n    THEN {_NOW} END;"
    # L6: the presented (owner, epoch) is the run's live lease.
    live = (
        f"EXISTS (SELECT 1 FROM {q}.rulvar_leases WHERE run_id = p_run "
        "AND owner = p_owner AND epoch = p_epoch AND expires_at > t)"
    )
    fenced = f"(p_owner IS NULL OR {live})"
    refused = f"""
  IF NOT FOUND THEN
    RETURN {STATUS_HELD};
  END IF;
  RETURN {STATUS_OK};"""
    check_first = f"""
  IF NOT {fenced} THEN
    RETURN {STATUS_HELD};
  END IF;"""
    # The J6 guard's generic plan (force_generic_plan) is a Bitmap Index Scan
    # of rulvar_entries_run_seq (run_id and seq >= p_seq), then a Sort and the
    # Limit over what it found: nothing, for an in-order append. The SQL comment
    # below says "ordered"; the probe, not the order, is what keeps it off a
    # sequential scan (test_postgres_plans). The text stays as it is: its
    # digest decides at boot whether the functions are dropped and re-created,
    # which a schema shared with running older writers should not see for a
    # comment.
    # The acquire's verdict on the run's lease row, shared by every function
    # that takes a lease (acquire, and the brief lease of brief_put).
    held_check = f"""  SELECT owner, epoch, expires_at INTO live FROM {q}.rulvar_leases WHERE run_id = p_run;
  IF FOUND AND live.expires_at > t THEN
    -- L11: the live lease of a dead holder is taken over at once. Its process
    -- held the liveness lock its lease recorded for as long as it ran; a lock
    -- nobody holds means the server ended that session. No record (the
    -- reference's lease, another epoch) or a held lock: the holder lives.
    -- Only a record this very server made (not one a failover's promotion
    -- inherited from a former primary, where the holder's session was).
    SELECT liveness INTO holder_key FROM {q}.rulvar_py_lease_holders
    WHERE run_id = p_run AND epoch = live.epoch
      AND server_started = pg_postmaster_start_time();
    IF holder_key IS NULL OR NOT pg_try_advisory_xact_lock(holder_key) THEN
      RETURN -live.epoch;  -- held: the live holder's epoch, negated
    END IF;
  END IF;"""
    next_epoch = f"""  -- The counter lives apart from the lease row and survives release, expiry
  -- and delete (L3-L5); never go below an epoch the lease row still carries.
  INSERT INTO {q}.rulvar_epochs AS e (run_id, epoch)
  VALUES (p_run, coalesce(live.epoch, 0) + 1)
  ON CONFLICT (run_id) DO UPDATE
    SET epoch = greatest(e.epoch, coalesce(live.epoch, 0)) + 1
  RETURNING epoch INTO next_epoch;
"""
    return (
        _Function(
            "rulvar_py_append",
            "p_run text, p_payload text, p_seq numeric, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}
  -- Fence and J6 in ONE conditional insert; seqs compare numerically.
  -- The guard is "no stored number seq >= p_seq", written as an ordered
  -- LIMIT 1 rather than NOT EXISTS: the generic plan of NOT EXISTS may bet on
  -- a sequential scan finding a match early, and an append (no match, by
  -- design) then read the whole table; the ordered form is served by the
  -- rulvar_entries_run_seq index whatever the statistics say.
  INSERT INTO {q}.rulvar_entries (run_id, payload)
  SELECT p_run, p_payload
  WHERE {fenced}
    AND (p_seq IS NULL OR (
      SELECT 1 FROM {q}.rulvar_entries
      WHERE run_id = p_run
        AND (payload::jsonb ->> 'seq')::numeric >= p_seq
        AND jsonb_typeof(payload::jsonb -> 'seq') = 'number'
      ORDER BY (payload::jsonb ->> 'seq')::numeric
      LIMIT 1) IS NULL);
  IF FOUND THEN
    RETURN {STATUS_OK};
  ELSIF {fenced} THEN
    RETURN {STATUS_ORDER};
  END IF;
  RETURN {STATUS_HELD};  -- J7: a stale lease wins over a stale seq
END""",
        ),
        _Function(
            "rulvar_py_put_meta",
            "p_run text, p_payload text, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}
  INSERT INTO {q}.rulvar_meta (run_id, payload)
  SELECT p_run, p_payload WHERE {fenced}
  ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload;{refused}
END""",
        ),
        _Function(
            "rulvar_py_delete",
            "p_run text, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}{check_first}
  -- Entries, meta and lease row go together; the epoch counter stays (M6, L5).
  DELETE FROM {q}.rulvar_entries WHERE run_id = p_run;
  DELETE FROM {q}.rulvar_meta WHERE run_id = p_run;
  DELETE FROM {q}.rulvar_leases WHERE run_id = p_run;
  RETURN {STATUS_OK};
END""",
        ),
        _Function(
            "rulvar_py_acquire",
            "p_run text, p_owner text, p_ttl_ms bigint, p_now bigint, p_liveness bigint",
            f"""
DECLARE
  t bigint;
  live record;
  next_epoch bigint;
  holder_key bigint;
BEGIN
  {lock}
{held_check}
{next_epoch}  IF live.owner IS NULL THEN
    INSERT INTO {q}.rulvar_leases (run_id, owner, epoch, expires_at)
    VALUES (p_run, p_owner, next_epoch, t + p_ttl_ms);
  ELSE
    -- Replace exactly the expired row we read (L7: owner and epoch pinned).
    UPDATE {q}.rulvar_leases
    SET owner = p_owner, epoch = next_epoch, expires_at = t + p_ttl_ms
    WHERE run_id = p_run AND owner = live.owner AND epoch = live.epoch;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'lease row of run % changed outside the run lock', p_run
        USING ERRCODE = '40001';
    END IF;
  END IF;
  -- A key is recorded only while its session holds it on THIS server: a
  -- holder whose liveness session sits on another one (a former primary after
  -- a failover) records none and counts as alive (unknown is never dead).
  IF p_liveness IS NULL OR NOT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND ((classid::bigint << 32) | objid::bigint) = p_liveness
  ) THEN
    DELETE FROM {q}.rulvar_py_lease_holders WHERE run_id = p_run;
  ELSE
    INSERT INTO {q}.rulvar_py_lease_holders AS h
      (run_id, epoch, liveness, server_started)
    VALUES (p_run, next_epoch, p_liveness, pg_postmaster_start_time())
    ON CONFLICT (run_id) DO UPDATE SET epoch = EXCLUDED.epoch,
      liveness = EXCLUDED.liveness, server_started = EXCLUDED.server_started;
  END IF;
  RETURN next_epoch;
END""",
        ),
        _Function(
            "rulvar_py_renew",
            "p_run text, p_owner text, p_epoch bigint, p_ttl_ms bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}
  -- L6 and L8 in one guarded update: live row, owner and epoch pinned.
  UPDATE {q}.rulvar_leases SET expires_at = t + p_ttl_ms
  WHERE run_id = p_run AND owner = p_owner AND epoch = p_epoch AND expires_at > t;{refused}
END""",
        ),
        _Function(
            "rulvar_py_release",
            "p_run text, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}
  DELETE FROM {q}.rulvar_leases
  WHERE run_id = p_run AND owner = p_owner AND epoch = p_epoch AND expires_at > t;{refused}
END""",
        ),
        _Function(
            "rulvar_py_blob_put",
            "p_run text, p_ref text, p_data bytea, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}
  INSERT INTO {q}.rulvar_blobs (ref, run_id, data)
  SELECT p_ref, p_run, p_data WHERE {fenced}
  ON CONFLICT (ref) DO UPDATE SET run_id = EXCLUDED.run_id, data = EXCLUDED.data;{refused}
END""",
        ),
        # The saver's fused writes (L15): a thread's first checkpoint with its
        # meta, and a hold's outcome with its release, each ONE fenced call.
        _Function(
            "rulvar_py_put_with_meta",
            "p_run text, p_ref text, p_data bytea, p_payload text, p_owner text, "
            "p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}{check_first}
  INSERT INTO {q}.rulvar_blobs (ref, run_id, data) VALUES (p_ref, p_run, p_data)
  ON CONFLICT (ref) DO UPDATE SET run_id = EXCLUDED.run_id, data = EXCLUDED.data;
  INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (p_run, p_payload)
  ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload;
  RETURN {STATUS_OK};
END""",
        ),
        _Function(
            "rulvar_py_put_meta_and_release",
            "p_run text, p_payload text, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}{check_first}
  INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (p_run, p_payload)
  ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload;
  DELETE FROM {q}.rulvar_leases
  WHERE run_id = p_run AND owner = p_owner AND epoch = p_epoch;
  RETURN {STATUS_OK};
END""",
        ),
        _Function(
            "rulvar_py_brief_put",
            "p_run text, p_owner text, p_now bigint, p_ref text, p_data bytea, "
            "p_under text, p_bound text, p_bytewise boolean, p_tail text, "
            "p_meta text, p_meta_replaces boolean, p_need_prior boolean",
            f"""
DECLARE
  t bigint;
  live record;
  next_epoch bigint;
  holder_key bigint;
  prior boolean;
  first_ref text;
BEGIN
  {lock}
  -- L16: acquire, one blob put and release in one call. The acquire's own
  -- verdict first (a live lease refuses, a dead holder's is taken over).
{held_check}
  -- Whether a ref under p_under whose rest matches p_tail was stored before
  -- this put: by the key's range where it orders like bytes (``_last_ref``),
  -- else through the run index. In the range, its first ref first: one index
  -- probe (ORDER BY with LIMIT 1 and no filter is an index scan under any
  -- plan), and almost always a checkpoint of the thread. Only if it is not is
  -- the rest searched: an EXISTS over the whole range lets the planner collect
  -- every ref of the range in a bitmap first, so each put would cost
  -- O(checkpoints of the thread).
  IF p_bytewise THEN
    SELECT ref INTO first_ref FROM {q}.rulvar_blobs
      WHERE ref >= p_under AND ref < p_bound ORDER BY ref LIMIT 1;
    prior := first_ref IS NOT NULL
      AND substr(first_ref, length(p_under) + 1) ~ p_tail;
    IF first_ref IS NOT NULL AND NOT prior THEN
      prior := EXISTS (SELECT 1 FROM {q}.rulvar_blobs
        WHERE ref > first_ref AND ref < p_bound
          AND substr(ref, length(p_under) + 1) ~ p_tail);
    END IF;
  ELSE
    prior := EXISTS (SELECT 1 FROM {q}.rulvar_blobs
      WHERE run_id = p_run AND starts_with(ref, p_under)
        AND substr(ref, length(p_under) + 1) ~ p_tail);
  END IF;
  IF p_need_prior AND NOT prior THEN
    RETURN 0;  -- nothing to continue: nothing written, the epoch unmoved
  END IF;
{next_epoch}
  -- The brief lease starts and ends inside this call: the row it replaced
  -- (an expired lease, or a dead holder's) goes, as its release would.
  DELETE FROM {q}.rulvar_leases WHERE run_id = p_run;
  DELETE FROM {q}.rulvar_py_lease_holders WHERE run_id = p_run;
  INSERT INTO {q}.rulvar_blobs (ref, run_id, data) VALUES (p_ref, p_run, p_data)
  ON CONFLICT (ref) DO UPDATE SET run_id = EXCLUDED.run_id, data = EXCLUDED.data;
  IF NOT prior AND p_meta IS NOT NULL THEN
    IF p_meta_replaces THEN
      INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (p_run, p_meta)
      ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload;
    ELSE
      INSERT INTO {q}.rulvar_meta (run_id, payload) VALUES (p_run, p_meta)
      ON CONFLICT (run_id) DO NOTHING;
    END IF;
  END IF;
  RETURN next_epoch;
END""",
        ),
        _Function(
            "rulvar_py_blob_delete",
            "p_run text, p_ref text, p_owner text, p_epoch bigint, p_now bigint",
            f"""
DECLARE
  t bigint;
BEGIN
  {lock}{check_first}
  DELETE FROM {q}.rulvar_blobs WHERE ref = p_ref;
  RETURN {STATUS_OK};
END""",
        ),
    )


def _function_ddl(q: str, fn: _Function) -> str:
    returns = {"rulvar_py_acquire": "bigint", "rulvar_py_brief_put": "bigint"}
    head = (
        f"CREATE FUNCTION {q}.{fn.name}({fn.args}) "
        f"RETURNS {returns.get(fn.name, 'integer')}"
    )
    return f"{head}\nLANGUAGE plpgsql VOLATILE AS $fn${fn.body}\n$fn$"


def _arg_types(fn: _Function) -> str:
    return ", ".join(part.split()[1] for part in fn.args.split(", "))


class Sql:
    """Every SQL text one store sends, for one schema."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        q = f'"{schema}"'
        self.quoted = q
        functions = _functions(q, schema)
        ddl = [_function_ddl(q, fn) for fn in functions]
        # Functions are (re)created only when their text changed, recorded as a
        # comment on the append function, so a booted schema takes no catalog
        # writes. A schema booted by an older version still holds its
        # rulvar_py_fence; the boot drops it (no caller is left).
        digest = hashlib.sha256("\n".join(ddl).encode()).hexdigest()[:32]
        marker_sig = f"{q}.rulvar_py_append({_arg_types(functions[0])})"
        table_ddl = {
            "rulvar_entries": "id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, "
            "payload TEXT NOT NULL",
            "rulvar_meta": "run_id TEXT PRIMARY KEY, payload TEXT NOT NULL",
            "rulvar_leases": "run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
            "epoch BIGINT NOT NULL,\n  expires_at BIGINT NOT NULL",
            "rulvar_epochs": "run_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL",
            "rulvar_blobs": "ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
            "data BYTEA NOT NULL",
            # Our own (rulvar_py_*, which the reference ignores): the liveness
            # key of the process that took each lease, for L11.
            "rulvar_py_lease_holders": "run_id TEXT PRIMARY KEY, "
            "epoch BIGINT NOT NULL, liveness BIGINT NOT NULL, "
            "server_started TIMESTAMPTZ NOT NULL",
        }
        tables = "\n".join(
            f"  CREATE TABLE IF NOT EXISTS {q}.{name} (\n  {columns});"
            for name, columns in table_ddl.items()
        )
        # An index that exists is not touched: CREATE INDEX IF NOT EXISTS would
        # still take a SHARE lock on the table and queue behind running writers.
        indexes = "\n".join(
            f"  IF to_regclass('{q}.{name}') IS NULL THEN\n"
            f"    CREATE INDEX {name} ON {q}.{table} {keys};\n  END IF;"
            for name, (table, keys) in APPENDIX_P_INDEXES.items()
        )
        # Drop then create: a changed return type cannot be replaced in place.
        functions_sql = "\n".join(
            f"    DROP FUNCTION IF EXISTS {q}.{fn.name}({_arg_types(fn)});\n    {text};"
            for fn, text in zip(functions, ddl, strict=True)
        )
        create_schema = (
            ""
            if schema == "public"
            else f"  IF to_regnamespace('{q}') IS NULL THEN\n"
            f"    CREATE SCHEMA {q};\n  END IF;\n"
        )
        current_functions = (
            f"coalesce(obj_description(to_regprocedure('{marker_sig}'), 'pg_proc'), '')"
            f" = '{digest}'"
        )
        # Everything the boot would create or replace, present and current:
        # catalog lookups only, no DDL and no PL/pgSQL (a fresh backend loads
        # the PL/pgSQL library on its first DO block, about 1.5 ms), so opening
        # a booted schema (every open but the first) costs one cheap query.
        complete = "\n     AND ".join(
            [
                *(
                    f"to_regclass('{q}.{name}') IS NOT NULL"
                    for name in (*table_ddl, *APPENDIX_P_INDEXES)
                ),
                current_functions,
            ]
        )
        # One simple-protocol message = one implicit transaction = one round trip:
        # the boot is never idle inside its transaction, so neither a short
        # idle_in_transaction_session_timeout nor a descheduled client can break it.
        # The lock comes first, so a schema another process is booting is judged
        # only once that boot has committed.
        self.boot = f"""
SELECT pg_advisory_xact_lock(hashtextextended('{boot_lock_key(schema)}', {LOCK_SEED}));
SET LOCAL client_min_messages = warning;
DO $boot$
BEGIN
  IF {complete} THEN
    RETURN;
  END IF;
{create_schema}{tables}
{indexes}
  IF NOT {current_functions} THEN
{functions_sql}
    DROP FUNCTION IF EXISTS {q}.rulvar_py_fence(text, text, bigint, bigint);
    COMMENT ON FUNCTION {marker_sig} IS '{digest}';
  END IF;
END
$boot$;
"""
        self.functions_digest = digest
        # Read without the boot lock: another process's boot commits as a whole,
        # so a schema found complete is complete; anything less runs the boot,
        # which judges again under the lock.
        self.booted = f"SELECT {complete}"

        by_name = {fn.name: fn for fn in functions}
        # Each call's text -> (function name, its argument types), for the
        # prepared call path (``_calls``), which declares those types itself.
        self.calls: dict[str, tuple[str, tuple[str, ...]]] = {}

        def call(name: str) -> str:
            # Explicit casts: a float seq or a NULL owner must not change which
            # function the server resolves.
            kinds = tuple(_arg_types(by_name[name]).split(", "))
            marks = ", ".join(f"%s::{kind}" for kind in kinds)
            # A scalar call, not SELECT * FROM f(): no function scan, no tuplestore.
            text = f"SELECT {q}.{name}({marks})"
            self.calls[text] = (name, kinds)
            return text

        self.append = call("rulvar_py_append")
        self.put_meta = call("rulvar_py_put_meta")
        self.delete = call("rulvar_py_delete")
        self.acquire = call("rulvar_py_acquire")
        self.renew = call("rulvar_py_renew")
        self.release = call("rulvar_py_release")
        self.blob_put = call("rulvar_py_blob_put")
        self.blob_delete = call("rulvar_py_blob_delete")
        self.put_with_meta = call("rulvar_py_put_with_meta")
        self.put_meta_and_release = call("rulvar_py_put_meta_and_release")
        self.brief_put = call("rulvar_py_brief_put")
        # A brief lease's end inside its own transaction (``_brief``): the row
        # it took, owner and epoch pinned. Under the run's lock since the
        # acquire, so nobody else can have replaced or extended it.
        self.brief_release = (
            f"DELETE FROM {q}.rulvar_leases "
            "WHERE run_id = %s AND owner = %s AND epoch = %s"
        )
        # The lease clock outside the functions (operator reads): an injected
        # now wins, else the server's clock in Unix ms.
        clock = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

        self.load = (
            f"SELECT payload FROM {q}.rulvar_entries WHERE run_id = %s ORDER BY id"
        )
        # Incremental read: the cursor's own row comes back without its payload,
        # so a cursor whose row is gone (the run was deleted) is detectable.
        self.load_since = (
            "SELECT id, CASE WHEN id = %s THEN NULL ELSE payload END "
            f"FROM {q}.rulvar_entries WHERE run_id = %s AND id >= %s ORDER BY id"
        )
        self.get_meta = f"SELECT payload FROM {q}.rulvar_meta WHERE run_id = %s"
        self.list_runs = f"SELECT payload FROM {q}.rulvar_meta"
        self.meta_status_in = "(payload::jsonb ->> 'status') = ANY(%s)"
        self.meta_name_is = "(payload::jsonb ->> 'name') = %s"
        self.list_runs_order = ' ORDER BY run_id COLLATE "C"'
        self.meta_page_first = (
            f"SELECT run_id, payload FROM {q}.rulvar_meta "
            'ORDER BY run_id COLLATE "C" LIMIT %s'
        )
        self.meta_page_after = (
            f"SELECT run_id, payload FROM {q}.rulvar_meta "
            'WHERE run_id COLLATE "C" > %s ORDER BY run_id COLLATE "C" LIMIT %s'
        )
        self.peek_lease = (
            f"SELECT owner, epoch, expires_at, coalesce(%s::bigint, {clock}) "
            f"FROM {q}.rulvar_leases WHERE run_id = %s"
        )
        self.blob_get = f"SELECT data FROM {q}.rulvar_blobs WHERE ref = %s"
        self.blob_list = (
            f"SELECT ref FROM {q}.rulvar_blobs "
            "WHERE run_id = %s AND strpos(ref, '/') > 0"
        )
        self.drop = f"DROP SCHEMA IF EXISTS {q} CASCADE"
        # A read-only handle's boot: are the five tables there at all?
        self.store_present = "SELECT " + " AND ".join(
            f"to_regclass('{q}.{table}') IS NOT NULL"
            for table in (
                "rulvar_entries",
                "rulvar_meta",
                "rulvar_leases",
                "rulvar_epochs",
                "rulvar_blobs",
            )
        )

    def boot_within(self, lock_timeout_ms: int) -> str:
        """The boot, its lock waits bounded by ``lock_timeout_ms`` (P3)."""
        return f"SET LOCAL lock_timeout = {int(lock_timeout_ms)};" + self.boot

    def list_runs_where(self, by_status: bool, by_name: bool) -> str:
        """The listing statement narrowed in SQL by status and/or name (M4)."""
        clauses = [
            clause
            for clause, wanted in (
                (self.meta_status_in, by_status),
                (self.meta_name_is, by_name),
            )
            if wanted
        ]
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        return self.list_runs + where + self.list_runs_order


# An explicit transaction around ONE operation call: only a failpoint hook needs
# it, to see the moments between the call and its commit (see ``_transaction``).
BEGIN: Final = "BEGIN"
COMMIT: Final = b"COMMIT"


def session_setup(
    lock_timeout_ms: int, idle_in_transaction_timeout_ms: int, readonly: bool
) -> str:
    """The settings every pooled session gets once, when it is made.

    ``plan_cache_mode = force_generic_plan``: the operation functions' statements
    are planned once per session. Left to ``auto``, the planner compares a
    generic plan of the J6 seq guard (unknown seq: a third of the run's entries
    estimated) with a custom one (one index probe estimated) and keeps choosing
    custom plans, so every append paid a full planning of its INSERT, the
    largest server-side cost of the call. Both plans probe the
    rulvar_entries_run_seq index (the generic one as a bitmap index scan).
    """
    setup = (
        f"SET lock_timeout = {int(lock_timeout_ms)}; "
        "SET idle_in_transaction_session_timeout = "
        f"{int(idle_in_transaction_timeout_ms)}; "
        "SET plan_cache_mode = force_generic_plan"
    )
    if readonly:
        # The server refuses any write in these sessions (SQLSTATE 25006), so an
        # observer cannot change the schema even through a bug of ours.
        setup += "; SET default_transaction_read_only = on"
    return setup
