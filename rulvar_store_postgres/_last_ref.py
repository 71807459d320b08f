"""``last_ref`` on PostgreSQL: a backward scan of the ref key where it orders like bytes (T12).

The blobs table's key is ``ref``, in the column's collation: the database's
default unless the column was declared with another. Refs compare by code
point (T4), so the key answers ``last_ref`` directly, a backward scan of
``[prefix, bound)`` that stops at its first row, only when that collation
orders like bytes: libc ``C``/``POSIX``, or the builtin provider's ``C`` and
``C.UTF-8``. libc ``C.UTF-8`` (the default of many Debian and Docker
clusters) leaves its order to the C library: glibc and musl sort it by code
point, but PostgreSQL promises nothing, so such a database default counts as
bytewise only when the server, asked at boot, sorts a set of probe strings
(case, punctuation, multi-byte and supplementary characters) exactly as
``COLLATE "C"`` does. Any other collation (``en_US.UTF-8``, ICU, a libc
``C.UTF-8`` failing the probe or declared on the column itself) gets the
fallback: the run's rows through the run index, filtered by prefix and ordered
``COLLATE "C"``. Correct everywhere, but it reads every blob row of the run.

The collation is learned once per handle by one catalog read at its boot
(``learn_collation``, on the boot's connection, so a handle's first
``last_ref`` pays no extra round trip), and kept in ``Plans.refs_bytewise``.
A handle that booted without learning it (no table yet) asks before its first
``last_ref``, and one that finds no table uses the fallback and asks again.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, TypeVar

from rulvar_store.backend import last_ref_args, prefix_upper_bound
from rulvar_store_postgres._plans import Plans, Step

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = [
    "alearn_collation",
    "collation_step",
    "last_ref_statements",
    "last_ref_step",
    "learn_collation",
    "orders_like_bytes",
]

OPERATION: Final = "blob_last_ref"
T = TypeVar("T")

_BYTEWISE_LIBC: Final = frozenset({"C", "POSIX"})
_BYTEWISE_BUILTIN: Final = frozenset({"C", "C.UTF-8"})
# libc's names for its code-point locale, as initdb and distributions spell it.
_LIBC_CODE_POINT: Final = frozenset({"C.UTF-8", "C.utf8", "C.UTF8", "C.utf-8"})
# Pairs that a locale-aware order puts apart from bytes: case, punctuation that
# dictionary orders skip, accents, the BMP's top and a supplementary character.
_PROBES: Final = (
    " ",
    "!",
    "-",
    ".",
    "/",
    "0",
    "9",
    ":",
    "A",
    "Z",
    "_",
    "a",
    "a b",
    "a-b",
    "a/b",
    "a0",
    "aB",
    "aa",
    "ab",
    "b",
    "z",
    "~",
    "\u00e9",
    "\u00ff",
    "\u0100",
    "\u017f",
    "\u1e9e",
    "\uff21",
    "\u4e2d",
    "\ufffd",
    "\U0001f600",
)


def orders_like_bytes(
    provider: str | None, collate: str | None, locale: str | None
) -> bool:
    """Whether a collation (provider code, libc name, provider locale) orders by code point."""
    if provider in (None, "c"):
        return collate in _BYTEWISE_LIBC
    if provider == "b":
        return locale in _BYTEWISE_BUILTIN
    return False


@lru_cache(maxsize=16)
def last_ref_statements(quoted_schema: str) -> tuple[str, str, str]:
    """(collation read, key scan, fallback) for one schema."""
    table = f"{quoted_schema}.rulvar_blobs"
    # to_jsonb reads columns that only some server versions have (datlocale
    # from 17, daticulocale 15-16) without naming them in SQL.
    collation = (
        "SELECT to_jsonb(c) ->> 'collprovider', to_jsonb(c) ->> 'collcollate', "
        "coalesce(to_jsonb(c) ->> 'colllocale', to_jsonb(c) ->> 'colliculocale'), "
        "to_jsonb(d) ->> 'datlocprovider', d.datcollate::text, "
        "coalesce(to_jsonb(d) ->> 'datlocale', to_jsonb(d) ->> 'daticulocale'), "
        # A parameter's text takes the database default's collation.
        '(SELECT array_agg(s ORDER BY s) = array_agg(s ORDER BY s COLLATE "C") '
        "FROM unnest(%s::text[]) AS u(s)) "
        "FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation, "
        "pg_database d WHERE a.attrelid = to_regclass(%s) AND a.attname = 'ref' "
        "AND d.datname = current_database()"
    )
    scan = (
        f"SELECT ref FROM {table} WHERE ref >= %s AND ref < %s "
        "ORDER BY ref DESC LIMIT 1"
    )
    fallback = (
        f"SELECT ref FROM {table} WHERE run_id = %s AND starts_with(ref, %s) "
        'ORDER BY ref COLLATE "C" DESC LIMIT 1'
    )
    return collation, scan, fallback


def _bytewise(row: tuple[Any, ...]) -> bool:
    (
        column_provider,
        column_collate,
        column_locale,
        db_provider,
        db_collate,
        db_locale,
        default_sorts_probes_like_bytes,
    ) = row
    if column_provider == "d":  # the column uses the database's default
        if db_provider in (None, "c") and db_collate in _LIBC_CODE_POINT:
            return bool(default_sorts_probes_like_bytes)
        return orders_like_bytes(db_provider, db_collate, db_locale)
    return orders_like_bytes(column_provider, column_collate, column_locale)


def _collation_args(plans: Plans) -> tuple[list[str], str]:
    """The collation read's parameters, in the order the SQL names them."""
    return list(_PROBES), f"{plans.sql.quoted}.rulvar_blobs"


def learn_collation(conn: Connection[Any], plans: Plans) -> None:
    """Record in ``plans`` whether the ref column orders like bytes (at boot)."""
    collation = last_ref_statements(plans.sql.quoted)[0]
    row = conn.execute(collation, _collation_args(plans)).fetchone()
    if row is not None:
        plans.refs_bytewise = _bytewise(row)


async def alearn_collation(conn: AsyncConnection[Any], plans: Plans) -> None:
    """``learn_collation`` for the asyncio store."""
    collation = last_ref_statements(plans.sql.quoted)[0]
    cursor = await conn.execute(collation, _collation_args(plans))
    row = await cursor.fetchone()
    if row is not None:
        plans.refs_bytewise = _bytewise(row)


def last_ref_step(plans: Plans, run_id: str, prefix: str) -> Step[str | None]:
    """The plan of ``last_ref`` (sync and asyncio twins): at most one catalog read, one scan.

    Raises:
        InvalidArgumentError: a ``_last_ref`` rule is broken; nothing was sent.
    """
    _, prefix = last_ref_args(run_id, prefix)
    _, scan, fallback = last_ref_statements(plans.sql.quoted)

    def first(values: list[Any]) -> str | None:
        return str(values[0]) if values else None

    def query() -> Step[str | None]:
        if plans.refs_bytewise:
            bound = prefix_upper_bound(prefix)
            # The prefix holds a '/', which can always be raised: a bound exists.
            assert bound is not None
            return Step(OPERATION, "values", scan, (prefix, bound), first)
        run_column = prefix.split("/", 1)[0]
        return Step(OPERATION, "values", fallback, (run_column, prefix), first)

    return collation_step(plans, OPERATION, query)


def collation_step(
    plans: Plans, operation: str, query: Callable[[], Step[T]]
) -> Step[T]:
    """``query()`` once ``plans.refs_bytewise`` is known: first the catalog read if not.

    Shared by the reads whose statement depends on the ref column's order
    (``last_ref``, ``get_under``).
    """
    if plans.refs_bytewise is not None:
        return query()
    collation = last_ref_statements(plans.sql.quoted)[0]

    def learned(rows: list[tuple[Any, ...]]) -> Step[T]:
        if rows:
            plans.refs_bytewise = _bytewise(rows[0])
        return query()

    return Step(operation, "rows", collation, _collation_args(plans), learned)
