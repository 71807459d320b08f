"""What a PostgreSQL store's spans and metrics say about it: never a credential."""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import conninfo_to_dict

from rulvar_store.backend import TelemetryTarget

__all__ = ["pool_figures", "postgres_target"]

DEFAULT_PORT = 5432


def _first(value: object) -> str:
    """The first of a libpq comma-separated list (multi-host conninfo)."""
    return str(value or "").split(",")[0].strip()


def postgres_target(conninfo: str, schema: str) -> TelemetryTarget:
    """``db.namespace`` as ``database|schema`` and the (first) server's address and port.

    Only the host, port and database keywords are read from the conninfo; the
    password is never looked at.
    """
    params = conninfo_to_dict(conninfo)
    host = _first(params.get("host")) or _first(params.get("hostaddr")) or None
    port_text = _first(params.get("port"))
    port = int(port_text) if port_text.isdigit() else DEFAULT_PORT
    database = _first(params.get("dbname")) or _first(params.get("user")) or None
    namespace = schema if database is None else f"{database}|{schema}"
    return TelemetryTarget("postgresql", namespace, host, port)


def pool_figures(pool: Any) -> dict[str, Any]:
    """The pool's own counters (``psycopg_pool``'s ``get_stats()``) under ``pool``.

    ``leases_taken_over`` is ``None``: the acquire is one server function whose
    answer (an epoch) does not say whether it replaced an expired lease.
    """
    return {"pool": dict(pool.get_stats()), "leases_taken_over": None}
