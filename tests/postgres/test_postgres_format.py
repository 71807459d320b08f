"""Appendix P format, lock keys and the lazy serialized boot (P2, P3, S11)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rulvar_store import ConfigError
from rulvar_store.backend import Failpoint, set_failpoint_hook
from rulvar_store_postgres import PostgresStore

pytestmark = pytest.mark.postgres

# Appendix P verbatim: the reference implementation's DDL for one schema.
APPENDIX_P_DDL = """
CREATE SCHEMA {s};
CREATE TABLE {s}.rulvar_entries (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, payload TEXT NOT NULL);
CREATE TABLE {s}.rulvar_meta (run_id TEXT PRIMARY KEY, payload TEXT NOT NULL);
CREATE TABLE {s}.rulvar_leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch BIGINT NOT NULL, expires_at BIGINT NOT NULL);
CREATE TABLE {s}.rulvar_epochs (run_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL);
CREATE TABLE {s}.rulvar_blobs (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, data BYTEA NOT NULL);
CREATE INDEX rulvar_entries_by_run ON {s}.rulvar_entries (run_id, id);
CREATE INDEX rulvar_entries_run_seq ON {s}.rulvar_entries (run_id, ((payload::jsonb ->> 'seq')::numeric));
CREATE INDEX rulvar_meta_by_status ON {s}.rulvar_meta ((payload::jsonb ->> 'status'));
CREATE INDEX rulvar_meta_by_name ON {s}.rulvar_meta ((payload::jsonb ->> 'name'));
CREATE INDEX rulvar_blobs_by_run ON {s}.rulvar_blobs (run_id);
"""

FORMAT_TABLES = (
    "rulvar_blobs",
    "rulvar_entries",
    "rulvar_epochs",
    "rulvar_leases",
    "rulvar_meta",
)


def _describe(conn: psycopg.Connection[Any], schema: str) -> dict[str, Any]:
    """Tables, columns, constraints and indexes of ``schema``, schema name removed."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        out = conn.execute(sql, (schema,)).fetchall()
        return sorted(
            tuple(v.replace(schema, "<s>") if isinstance(v, str) else v for v in row)
            for row in out
        )

    return {
        "columns": rows(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name IN ('rulvar_blobs','rulvar_entries','rulvar_epochs',"
            "'rulvar_leases','rulvar_meta')"
        ),
        "constraints": rows(
            "SELECT tc.table_name, tc.constraint_type, kcu.column_name "
            "FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu "
            "ON tc.constraint_name = kcu.constraint_name AND tc.table_schema = kcu.table_schema "
            "WHERE tc.table_schema = %s AND tc.constraint_type IN ('PRIMARY KEY','UNIQUE','FOREIGN KEY') "
            "AND tc.table_name NOT LIKE 'rulvar\\_py\\_%%'"
        ),
        "indexes": rows(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename IN ('rulvar_blobs','rulvar_entries','rulvar_epochs',"
            "'rulvar_leases','rulvar_meta')"
        ),
    }


@pytest.mark.clause("P2")
def test_created_schema_is_exactly_appendix_p(
    make_store: Callable[..., PostgresStore],
    schema: str,
    new_schema: Callable[[], str],
    admin: psycopg.Connection[Any],
) -> None:
    """The boot creates the five tables, keys and indexes exactly as Appendix P."""
    make_store().get_meta("boot-probe")
    reference = new_schema()
    admin.execute(APPENDIX_P_DDL.format(s=f'"{reference}"'))
    ours, theirs = _describe(admin, schema), _describe(admin, reference)
    assert ours == theirs
    assert len(ours["indexes"]) == 10  # 5 primary keys + the 5 named indexes


@pytest.mark.clause("P2")
def test_every_other_object_is_prefixed_rulvar_py(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """Our own objects (functions, the L11 lease-holders table) carry the
    rulvar_py_ prefix; nothing else is added."""
    store = make_store()
    store.get_meta("boot-probe")
    relations = {
        row[0]
        for row in admin.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s",
            (schema,),
        )
    }
    expected = (
        set(FORMAT_TABLES)
        | {f"{t}_pkey" for t in FORMAT_TABLES}
        | {
            "rulvar_entries_id_seq",
            "rulvar_entries_by_run",
            "rulvar_entries_run_seq",
            "rulvar_meta_by_status",
            "rulvar_meta_by_name",
            "rulvar_blobs_by_run",
        }
        | {"rulvar_py_lease_holders", "rulvar_py_lease_holders_pkey"}
    )
    assert relations == expected
    functions = {
        row[0]
        for row in admin.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s",
            (schema,),
        )
    }
    assert functions
    assert all(name.startswith("rulvar_py_") for name in functions)


@pytest.mark.clause("P2")
def test_payloads_are_stored_as_the_exact_json_text(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """Payloads are TEXT holding the serialized record, key order and floats intact."""
    store = make_store()
    store.append("r", {"z": 1, "seq": 0, "a": 0.30000000000000004, "u": "δ"})
    (text,) = admin.execute(
        f'SELECT payload FROM "{schema}".rulvar_entries'
    ).fetchone() or ("",)
    assert text == '{"z":1,"seq":0,"a":0.30000000000000004,"u":"δ"}'


def _advisory_keys(admin: psycopg.Connection[Any]) -> set[int]:
    keys = set()
    for classid, objid in admin.execute(
        "SELECT classid::bigint, objid::bigint FROM pg_locks "
        "WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
    ):
        key = (classid << 32) | objid
        keys.add(key - (1 << 64) if key >= 1 << 63 else key)
    return keys


@pytest.mark.clause("P4")
@pytest.mark.parametrize(
    "operation",
    [
        "append",
        "put_meta",
        "delete",
        "acquire",
        "renew",
        "release",
        "blob_put",
        "blob_delete",
    ],
)
def test_run_lock_key_is_the_appendix_p_key(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
    operation: str,
) -> None:
    """Every run-scoped mutation, leased or not, holds the Appendix P run lock.

    pg_advisory_xact_lock(hashtextextended('<schema>:<runId>', 8214)), observed in
    pg_locks while the transaction is open, and released at commit.
    """
    store = make_store()
    lease = (
        store.acquire("run-42", "owner") if operation in ("renew", "release") else None
    )
    (expected,) = admin.execute(
        "SELECT hashtextextended(%s, 8214)", (f"{schema}:run-42",)
    ).fetchone() or (None,)
    seen: list[set[int]] = []

    def hook(op: str, point: Failpoint) -> None:
        if op == operation and point == "after-fence-check":
            seen.append(_advisory_keys(admin))

    previous = set_failpoint_hook(hook)
    try:
        if operation == "append":
            store.append("run-42", {"seq": 1})
        elif operation == "put_meta":
            store.put_meta({"runId": "run-42", "status": "running"})
        elif operation == "delete":
            store.delete("run-42")
        elif operation == "acquire":
            store.acquire("run-42", "owner")
        elif operation in ("renew", "release"):
            assert lease is not None
            getattr(store, operation)(lease)
        elif operation == "blob_put":
            store.transcripts().put("run-42/blob", b"x")
        else:
            store.transcripts().delete("run-42/blob")
    finally:
        set_failpoint_hook(previous)
    assert len(seen) == 1
    assert expected in seen[0]
    assert expected not in _advisory_keys(admin)  # a transaction lock: gone at commit


def _wait_for(condition: Callable[[], bool], what: str, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


@pytest.mark.clause("P3")
def test_boot_queues_on_the_appendix_p_boot_lock(
    pg_url: str, make_store: Callable[..., PostgresStore], schema: str
) -> None:
    """The lazy boot waits on hashtextextended('rulvar-boot:<schema>', 8214)."""
    store = make_store()
    with psycopg.connect(pg_url) as holder:  # not autocommit: holds the lock
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 8214))",
            (f"rulvar-boot:{schema}",),
        )
        done = threading.Event()
        errors: list[BaseException] = []

        def first_call() -> None:
            try:
                store.get_meta("boot-probe")
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=first_call)
        worker.start()
        with psycopg.connect(pg_url, autocommit=True) as probe:
            _wait_for(
                lambda: (
                    probe.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND wait_event = 'advisory' AND query LIKE %s",
                        (f"%rulvar-boot:{schema}%",),
                    ).fetchone()
                    == (1,)
                ),
                "the boot to queue on the boot lock",
            )
        assert not done.is_set()
        holder.rollback()
    worker.join(timeout=60)
    assert done.is_set()
    assert not errors


@pytest.mark.clause("P3")
def test_boot_is_lazy_and_creates_a_missing_schema(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """Construction touches nothing; the first call creates the non-public schema."""
    store = make_store()
    exists = "SELECT to_regnamespace(%s) IS NOT NULL"
    assert admin.execute(exists, (schema,)).fetchone() == (False,)
    assert store.get_meta("boot-probe") is None
    assert admin.execute(exists, (schema,)).fetchone() == (True,)


@pytest.mark.clause("P3")
def test_boot_is_memoized_per_instance(
    pg_url: str, make_store: Callable[..., PostgresStore], schema: str
) -> None:
    """After one boot an instance never takes the boot lock again."""
    store = make_store()
    store.get_meta("boot-probe")
    with psycopg.connect(pg_url) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 8214))",
            (f"rulvar-boot:{schema}",),
        )
        store.append("r", {"seq": 1})  # would queue behind the holder if it re-booted
        assert store.load("r") == [{"seq": 1}]
        holder.rollback()


@pytest.mark.clause("P3")
def test_failed_boot_clears_the_memo(
    make_store: Callable[..., PostgresStore],
    schema: str,
    admin: psycopg.Connection[Any],
) -> None:
    """A boot that fails raises a typed error; the next call boots again and works.

    A foreign table shape is a setup mismatch, not an outage: ``ConfigError``,
    never retryable.
    """
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(f'CREATE TABLE "{schema}".rulvar_entries (bogus int)')
    store = make_store()
    with pytest.raises(ConfigError) as caught:
        store.get_meta("boot-probe")
    assert not caught.value.retryable
    admin.execute(f'DROP TABLE "{schema}".rulvar_entries')
    assert store.get_meta("boot-probe") is None
    store.append("r", {"seq": 0})
    assert store.load("r") == [{"seq": 0}]


_BOOT_CHILD = textwrap.dedent(
    """
    import os, sys, time
    from rulvar_store_postgres import PostgresStore
    url, schema, go = sys.argv[1], sys.argv[2], sys.argv[3]
    while not os.path.exists(go):
        time.sleep(0.005)
    with PostgresStore(url, schema=schema, ttl_ms=250) as store:
        assert store.get_meta("boot-probe") is None
    """
)


@pytest.mark.clause("S11")
@pytest.mark.clause("P3")
def test_boot_storm_eight_processes_two_rounds(
    pg_url: str, new_schema: Callable[[], str], admin: psycopg.Connection[Any]
) -> None:
    """S11: 8 processes booting ONE fresh schema at once all exit 0; twice."""
    for _round in range(2):
        schema = new_schema()
        with tempfile.TemporaryDirectory() as scratch:
            go = os.path.join(scratch, "go")
            children = [
                subprocess.Popen(
                    [sys.executable, "-c", _BOOT_CHILD, pg_url, schema, go],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                for _ in range(8)
            ]
            time.sleep(
                0.2
            )  # let the interpreters start; the go file releases them together
            Path(go).touch()
            failures = []
            for child in children:
                try:
                    _, err = child.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()
                    _, err = child.communicate()
                if child.returncode != 0:
                    failures.append(err.decode(errors="replace")[-2000:])
            assert not failures, failures
        tables = admin.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name NOT LIKE 'rulvar\\_py\\_%%'",
            (schema,),
        ).fetchone()
        assert tables == (5,)


@pytest.mark.clause("P2")
def test_mixed_case_and_reserved_schema_names_are_quoted_everywhere(
    pg_url: str, admin: psycopg.Connection[Any]
) -> None:
    """Schema names are identifiers as given: 'Mixed_x' and 'select' both work."""
    import secrets

    for name in (
        f"Mixed_{secrets.token_hex(4)}",
        f"select_{secrets.token_hex(2)}",
        "user",
    ):
        try:
            with PostgresStore(pg_url, schema=name) as store:
                lease = store.acquire("r", "o")
                store.append("r", {"seq": 1}, lease)
                store.transcripts().put("r/x", b"1", lease)
            with PostgresStore(pg_url, schema=name) as again:
                assert again.load("r") == [{"seq": 1}]
                assert again.transcripts().get("r/x") == b"1"
            exists = admin.execute(
                "SELECT to_regnamespace(%s)", (f'"{name}"',)
            ).fetchone()
            assert exists is not None
            assert exists[0] is not None
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
