"""A realistic broken PostgreSQL store: the lease is checked by its own query first.

``SeparateFenceQuery`` checks the presented lease with a plain autocommit SELECT
and then runs the write as if unleased (the server function's own fence is
skipped), the classic check-then-act split across two transactions.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from itertools import count
from typing import TypeVar, final

import psycopg

from rulvar_store import Clock, LeaseHeldError, OpenedStore
from rulvar_store.backend import LocationFactory, StoreLocation
from rulvar_store_postgres import PostgresStore
from rulvar_store_postgres._plans import Step
from tests._postgres_gate import postgres_url as postgres_url

URL_ENV = ("RULVAR_TEST_POSTGRES_URL", "RULVAR_POSTGRES_URL")


# The fenced writes: their plans end with (owner, epoch, now), the run id first.
_FENCED = frozenset({"append", "put_meta", "delete", "blob_put", "blob_delete"})
_LIVE = (
    'SELECT 1 FROM "{schema}".rulvar_leases '
    "WHERE run_id = %s AND owner = %s AND epoch = %s AND expires_at > "
    "coalesce(%s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)"
)

T = TypeVar("T")


@final
class SeparateFenceQuery(PostgresStore):  # type: ignore[misc]  # final; the bug is the point
    def _run(self, step: Step[T]) -> T:
        if step.kind == "mutate" and step.operation in _FENCED:
            *head, owner, epoch, now = step.args
            if owner is not None:
                check = Step(
                    step.operation,
                    "rows",
                    _LIVE.format(schema=self.schema),
                    (head[0], owner, epoch, now),
                    lambda rows: rows,
                )
                if not super()._run(check):
                    raise LeaseHeldError("not live", head[0], owner, epoch)
                # Then the write as if unleased: the server's own fence is skipped.
                step = replace(step, args=(*head, None, None, now))
        return super()._run(step)


def schema_locations(
    url: str, store: type[PostgresStore], prefix: str
) -> tuple[LocationFactory, list[str]]:
    """Fresh schemas ``<prefix>_<hex>_<n>`` on ``url``, each opened through ``store``.

    Returns the factory and the schema names it made, for the test to drop after.
    The locations declare ``processes``: ``store`` is a module-level class and the
    opener carries only it and the URL, so a spawned child opens the same store.
    """
    prefix, numbers, made = f"{prefix}_{secrets.token_hex(4)}", count(), []

    def fresh() -> StoreLocation:
        schema = f"{prefix}_{next(numbers)}"
        made.append(schema)

        def opener(
            ttl_ms: int | None, now: Clock | None, fail_fast: bool
        ) -> OpenedStore:
            opened = store(
                url,
                schema=schema,
                ttl_ms=ttl_ms or 60_000,
                now=now,
                lock_timeout_ms=200 if fail_fast else None,
            )
            return OpenedStore(opened, opened.transcripts(), (opened.close,))

        def drop() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        return StoreLocation(
            name=schema,
            opener=opener,
            contention=True,
            processes=True,
            cleanup=drop,
        )

    return fresh, made


def postgres_locations(url: str) -> tuple[LocationFactory, list[str]]:
    """Fresh schemas on ``url`` opened through the broken class; drop the names after."""
    return schema_locations(url, SeparateFenceQuery, "rulvar_broken")
