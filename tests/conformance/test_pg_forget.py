"""The forgetting proxy itself (P23's harness): the server forgets, the client sees nothing else.

``ForgettingProxy`` injects ``DEALLOCATE ALL`` (or ``DISCARD ALL``) into a
session at its next moment of rest and swallows the replies: a statement the
client prepared is then gone (SQLSTATE 26000), while every query's own result
still reaches the client unchanged, TLS requests are answered "no" by the
proxy, and close() ends every pump promptly.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from rulvar_conformance.harness.pg_forget import ForgettingProxy
from tests._postgres_gate import postgres_url


def _through(url: str, address: tuple[str, int], sslmode: str) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = (f"{user}@" if user else "") + f"{address[0]}:{address[1]}"
    query = "&".join(filter(None, [parts.query, f"sslmode={sslmode}"]))
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@pytest.mark.postgres
@pytest.mark.clause("P23")
@pytest.mark.parametrize("sql", ["DEALLOCATE ALL", "DISCARD ALL"])
def test_a_prepared_statement_is_forgotten_and_nothing_else_changes(sql: str) -> None:
    url = postgres_url()
    target = urlsplit(url)
    with ForgettingProxy(
        (target.hostname or "127.0.0.1", target.port or 5432)
    ) as proxy:
        # sslmode=prefer: the proxy's "no" to the TLS request keeps it plaintext.
        dsn = _through(url, proxy.address, "prefer")
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
            conn.execute("PREPARE rv_probe AS SELECT 41 + 1")
            row = conn.execute("EXECUTE rv_probe").fetchone()
            assert row == (42,)
            assert proxy.forgotten == 0
            proxy.forget(sql)
            # The injection runs before this query, whose own result comes back.
            row = conn.execute("SELECT 'still answered'").fetchone()
            assert row == ("still answered",)
            assert proxy.forgotten == 1
            assert proxy.refused == []
            with pytest.raises(psycopg.Error) as gone:
                conn.execute("EXECUTE rv_probe")
            assert gone.value.sqlstate == "26000"
            # Armed once: the next rest injects nothing more.
            conn.execute("PREPARE rv_probe AS SELECT 7")
            assert conn.execute("EXECUTE rv_probe").fetchone() == (7,)
            assert proxy.forgotten == 1


@pytest.mark.postgres
def test_a_refused_injection_is_reported_not_passed_on() -> None:
    """An injected statement the server refuses is counted as refused, never
    passed on: the client's own query is answered as if nothing happened."""
    url = postgres_url()
    target = urlsplit(url)
    with ForgettingProxy(
        (target.hostname or "127.0.0.1", target.port or 5432)
    ) as proxy:
        dsn = _through(url, proxy.address, "disable")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1")
            proxy.forget("SELECT 1/0")
            assert conn.execute("SELECT 2").fetchone() == (2,)
            assert proxy.forgotten == 0
            assert len(proxy.refused) == 1
            assert "division by zero" in proxy.refused[0]
