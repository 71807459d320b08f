"""PostgresStore against the dict model: two instances (two pools) on one schema.

The generic machine lives in ``tests/stateful/_machine.py`` (shared with SQLite).
One rule is narrowed here: the machine also appends ``seq: true``, which the
Appendix P format cannot hold (its index casts ``payload::jsonb ->> 'seq'`` to
numeric, so the server refuses the row); PostgresStore raises ``ContractError``
for it and persists nothing, which ``test_postgres_fence.py`` checks directly.
"""

from __future__ import annotations

import importlib
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from rulvar_store import Lease
from rulvar_store_postgres import PostgresStore

# The shared machine (it also registers the hypothesis profiles). Loaded by name
# because tests are not a package under --import-mode=importlib.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stateful"))
_machine: Any = importlib.import_module("_machine")

pytestmark = pytest.mark.postgres

_SERVER: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _server(pg_url: str) -> None:
    """Skip or fail (CI) without a server, like every test here; else expose its URL."""
    _SERVER["url"] = pg_url


def open_postgres_pair(
    now: Callable[[], int], ttl_ms: int
) -> tuple[PostgresStore, PostgresStore, Callable[[], None]]:
    """Two PostgresStore instances with their own pools over one fresh schema."""
    url = _SERVER["url"]
    schema = f"rulvar_sm_{secrets.token_hex(6)}"
    a = PostgresStore(url, schema=schema, ttl_ms=ttl_ms, now=now, pool_max_size=2)
    b = PostgresStore(url, schema=schema, ttl_ms=ttl_ms, now=now, pool_max_size=2)

    def cleanup() -> None:
        a.close()
        b.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return a, b, cleanup


_Base = _machine.make_store_machine(open_postgres_pair)
_APPENDIX_P_SEQ_KINDS = st.sampled_from(
    ("next", "next", "gap", "same", "lower", "float", "none")
)


def _append(
    self: RuleBasedStateMachine,
    handle: int,
    run_id: str,
    kind: str,
    pick: int | Lease | None,
) -> None:
    _Base.append(self, handle, run_id, kind, pick)


# The shared machine with every seq kind except ``true`` (module docstring): the
# subclass's rule replaces the inherited one of the same name.
PostgresMachine = cast(
    type[RuleBasedStateMachine],
    type(
        "PostgresMachine",
        (_Base,),
        {
            "append": rule(
                handle=_machine.handles,
                run_id=_machine.runs,
                kind=_APPENDIX_P_SEQ_KINDS,
                pick=_machine.lease_picks,
            )(_append)
        },
    ),
)
TestPostgresStateful = pytest.mark.clause("L6")(PostgresMachine.TestCase)
TestPostgresStateful.settings = _machine.machine_settings()
