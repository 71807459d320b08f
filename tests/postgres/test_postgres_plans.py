"""The server-side plans of the hot path stay index probes as the journal grows (P15).

Pooled sessions run ``plan_cache_mode = force_generic_plan`` (``session_setup``),
so the operation functions' statements are planned once, without the call's
values. A plan that only pays off for some values is then taken for all of
them; these tests read the plan the server actually ran (``auto_explain``,
reported to the client as a notice) on data shaped to tempt the planner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from rulvar_store_postgres import PostgresStore
from tests._postgres_gate import in_ci

pytestmark = pytest.mark.postgres

# A journal the generic plan of a NOT EXISTS guard answered with a sequential
# scan (measured on PostgreSQL 15): few runs, wide rows, so the planner bets on
# finding a match early, and an append, which by design has none, read it all.
ROWS, RUNS, PAD = 50_000, 4, 300


@pytest.fixture
def explained_store(
    pg_url: str, schema: str
) -> Iterator[tuple[PostgresStore, list[str]]]:
    """A one-connection store whose session reports every nested plan as a notice."""
    store = PostgresStore(pg_url, schema=schema, pool_max_size=1)
    notices: list[str] = []
    try:
        store.get_meta("boot")
        with store._pool.connection() as conn:  # the store's only pooled session
            try:
                conn.execute("LOAD 'auto_explain'")
            except psycopg.errors.InsufficientPrivilege:
                reason = "auto_explain needs a superuser to LOAD on the test server"
                if in_ci():  # CI's server is ours, as superuser: P15 must run there
                    pytest.fail(f"CI=true and {reason}", pytrace=False)
                pytest.skip(reason)
            conn.execute(
                "SET auto_explain.log_min_duration = 0; "
                "SET auto_explain.log_nested_statements = on; "
                "SET auto_explain.log_level = notice"
            )
            conn.add_notice_handler(
                lambda diag: notices.append(diag.message_primary or "")
            )
        yield store, notices
    finally:
        store.close()


def _fill_skewed_journal(admin: psycopg.Connection[Any], schema: str) -> None:
    admin.execute(
        f'INSERT INTO "{schema}".rulvar_entries (run_id, payload) '
        f"SELECT 'run-' || (g % {RUNS}), "
        f"""'{{"seq":' || g || ',"pad":"' || repeat('x', {PAD}) || '"}}' """
        f"FROM generate_series(1, {ROWS}) g"
    )
    admin.execute(f'ANALYZE "{schema}".rulvar_entries')


@pytest.mark.clause("P15")
def test_append_seq_guard_is_an_index_probe_on_a_large_skewed_journal(
    explained_store: tuple[PostgresStore, list[str]],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    """An append's J6 guard is an index scan of rulvar_entries_run_seq, never a seq scan."""
    store, notices = explained_store
    _fill_skewed_journal(admin, schema)
    lease = store.acquire("run-1", "writer")
    for seq in range(ROWS + 1, ROWS + 4):  # past the prepare threshold: the reused plan
        store.append("run-1", {"seq": seq, "kind": "step"}, lease)
    inserts = [
        plan for plan in notices if "INSERT INTO" in plan and "rulvar_entries" in plan
    ]
    assert inserts, notices
    for plan in inserts:
        assert "Seq Scan on rulvar_entries" not in plan, plan
        assert "rulvar_entries_run_seq" in plan, plan
