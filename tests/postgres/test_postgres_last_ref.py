"""last_ref's two plans on PostgreSQL: key scan where refs order like bytes, else fallback (T12).

The handle learns the ref column's collation at its boot;
both plans must give the code point answer, and the key scan must be the
backward index scan that stops at one row.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from rulvar_store_postgres import PostgresStore
from rulvar_store_postgres._last_ref import _bytewise, orders_like_bytes

pytestmark = pytest.mark.postgres

REFS = ("run/c/a", "run/c/B", "run/c/a\U0010ffff", "run/c2/z", "other/c/z")


def _answers(store: PostgresStore) -> list[str | None]:
    blobs = store.transcripts()
    for ref in REFS:
        blobs.put(ref, b"x")
    return [
        blobs.last_ref("run", prefix)
        for prefix in ("run/", "run/c/", "run/c/a", "run/c", "run/d")
    ]


EXPECTED = ["run/c2/z", "run/c/a\U0010ffff", "run/c/a\U0010ffff", "run/c2/z", None]


@pytest.mark.clause("T12")
@pytest.mark.parametrize(
    ("provider", "collate", "locale", "bytewise"),
    [
        (None, "C", None, True),
        ("c", "POSIX", None, True),
        ("c", "C.UTF-8", None, False),
        ("c", "en_US.UTF-8", None, False),
        ("i", None, "und", False),
        ("b", None, "C.UTF-8", True),
        ("b", None, "C", True),
    ],
)
def test_which_collations_order_like_bytes(
    provider: str | None, collate: str | None, locale: str | None, bytewise: bool
) -> None:
    """Only libc C/POSIX and the builtin C locales are trusted for the key scan."""
    assert orders_like_bytes(provider, collate, locale) is bytewise


@pytest.mark.clause("T12")
@pytest.mark.parametrize("probes_sort_like_bytes", [True, False])
def test_a_libc_c_utf8_default_is_trusted_only_when_the_probes_sort_like_bytes(
    probes_sort_like_bytes: bool,
) -> None:
    """libc C.UTF-8's order is the C library's: the server's probe answer decides."""
    for name in ("C.UTF-8", "C.utf8"):
        row = ("d", None, None, "c", name, None, probes_sort_like_bytes)
        assert _bytewise(row) is probes_sort_like_bytes
    # A locale order is never trusted, whatever a probe says.
    assert _bytewise(("d", None, None, "c", "en_US.UTF-8", None, True)) is False


@pytest.mark.clause("T12")
def test_the_database_collation_decides_the_plan_and_both_answer_alike(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """The server's default collation is learned; the answer is the code point one."""
    row = admin.execute(
        "SELECT datcollate FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    assert row is not None
    with PostgresStore(pg_url, schema=schema) as store:
        assert _answers(store) == EXPECTED
        # glibc and musl sort C.UTF-8 by code point, so the probe passes there.
        bytewise = ("C", "POSIX", "C.UTF-8", "C.utf8")
        assert store._plans.refs_bytewise is (row[0] in bytewise)


@pytest.mark.clause("T12")
def test_a_column_declared_collate_c_gets_the_backward_key_scan(
    pg_url: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """ref COLLATE "C": the handle scans the key backward and answers alike."""
    with PostgresStore(pg_url, schema=schema) as boot:
        boot.get_meta("boot")
    admin.execute(
        f'ALTER TABLE "{schema}".rulvar_blobs ALTER COLUMN ref TYPE text COLLATE "C"'
    )
    with PostgresStore(pg_url, schema=schema) as store:
        assert _answers(store) == EXPECTED
        assert store._plans.refs_bytewise is True
    plan = "\n".join(
        str(line[0])
        for line in admin.execute(
            f'EXPLAIN SELECT ref FROM "{schema}".rulvar_blobs '
            "WHERE ref >= 'run/c/' AND ref < 'run/c0' ORDER BY ref DESC LIMIT 1"
        ).fetchall()
    )
    assert "Backward" in plan, plan
