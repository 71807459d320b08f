"""``get_under`` on PostgreSQL: a range scan of the ref key where it orders like bytes (T13).

The same collation care as ``last_ref`` (``_last_ref``): where the ref
column orders like bytes (``Plans.refs_bytewise``, learned at boot), the
blobs under a prefix are exactly the key range ``[prefix, bound)``, read in
one index range scan. Elsewhere the run's rows are read through the run
index and kept by ``starts_with`` (correct under any collation, but its cost
follows the run's blobs). Either way the pairs are sorted here, by code
point, so the answer never depends on the column's order.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from rulvar_store.backend import get_under_args, prefix_upper_bound
from rulvar_store_postgres._last_ref import collation_step
from rulvar_store_postgres._plans import Plans, Step

__all__ = ["get_under_statements", "get_under_step"]

OPERATION: Final = "blob_get_under"


@lru_cache(maxsize=16)
def get_under_statements(quoted_schema: str) -> tuple[str, str]:
    """(range scan, fallback) for one schema."""
    table = f"{quoted_schema}.rulvar_blobs"
    scan = f"SELECT ref, data FROM {table} WHERE ref >= %s AND ref < %s"
    fallback = (
        f"SELECT ref, data FROM {table} WHERE run_id = %s AND starts_with(ref, %s)"
    )
    return scan, fallback


def _pairs(rows: list[tuple[Any, ...]]) -> list[tuple[str, bytes]]:
    return sorted((str(ref), bytes(data)) for ref, data in rows)


def get_under_step(
    plans: Plans, run_id: str, prefix: str
) -> Step[list[tuple[str, bytes]]]:
    """The plan of ``get_under`` (sync and asyncio twins): at most one catalog read, one scan.

    Raises:
        InvalidArgumentError: a ``_last_ref`` rule is broken; nothing was sent.
    """
    _, prefix = get_under_args(run_id, prefix)
    scan, fallback = get_under_statements(plans.sql.quoted)

    def query() -> Step[list[tuple[str, bytes]]]:
        if plans.refs_bytewise:
            bound = prefix_upper_bound(prefix)
            # The prefix holds a '/', which can always be raised: a bound exists.
            assert bound is not None
            return Step(OPERATION, "rows", scan, (prefix, bound), _pairs)
        run_column = prefix.split("/", 1)[0]
        return Step(OPERATION, "rows", fallback, (run_column, prefix), _pairs)

    return collation_step(plans, OPERATION, query)
