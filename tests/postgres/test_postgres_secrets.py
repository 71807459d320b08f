"""P11: no password of a PostgreSQL URL reaches an error message or a log line.

Real roles with real passwords on the shared server. The server trusts every
login, so what is checked is what the store prints and logs, not the
authentication: a password holding a raw '@', '/', '?' or '#' (which moves
where libpq and URL parsers end the credentials) is a ConfigError naming the
fix and quoting nothing of it, its percent-encoded form works, and the records
of psycopg's and the pool's loggers never carry the password.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from urllib.parse import quote

import pytest

from rulvar_store import ConfigError, StoreUnavailableError, open_store
from rulvar_store_postgres import AsyncPostgresStore, PostgresStore

pytestmark = pytest.mark.postgres

SECRET = "Secret99"


def _pieces(password: str) -> list[str]:
    """The password and the parts a parser would split it into around its raw character."""
    return [password, SECRET, *(p for p in password.split(password[2]) if len(p) > 3)]


def _leaks(text: str, password: str) -> list[str]:
    return [piece for piece in _pieces(password) if piece in text]


def _server(pg_url: str) -> str:
    """host:port/dbname of the test server, from its URL."""
    return pg_url.rpartition("@")[2] if "@" in pg_url else pg_url.split("://", 1)[1]


@pytest.fixture
def pg_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="psycopg")
    return caplog


@pytest.mark.clause("P11")
@pytest.mark.parametrize("raw", ["#", "/", "?", "@"])
def test_a_raw_reserved_character_in_the_password_is_refused_unquoted(
    raw: str,
    pg_url: str,
    schema: str,
    make_role: Callable[..., str],
    pg_logs: pytest.LogCaptureFixture,
) -> None:
    password = f"Pw{raw}{SECRET}"
    role = make_role(password)
    raw_url = f"postgresql://{role}:{password}@{_server(pg_url)}"
    for opener in (
        lambda: PostgresStore(raw_url, schema=schema),
        lambda: AsyncPostgresStore(raw_url, schema=schema),
        lambda: open_store(raw_url, schema=schema).journal,
    ):
        with pytest.raises(ConfigError) as caught:
            opener()  # refused at construction (P1): nothing connects
        message = str(caught.value)
        assert not _leaks(message, password), message
        assert "percent-encode" in message
    # The same password, percent-encoded, is a working URL.
    encoded = f"postgresql://{role}:{quote(password, safe='')}@{_server(pg_url)}"
    with PostgresStore(encoded, schema=schema) as store:
        store.append("r", {"seq": 0})
        assert store.load("r") == [{"seq": 0}]
    logged = "\n".join(record.getMessage() for record in pg_logs.records)
    assert not _leaks(logged, password), logged


@pytest.mark.clause("P11")
def test_failed_connections_log_and_raise_no_password(
    pg_url: str,
    make_role: Callable[..., str],
    pg_logs: pytest.LogCaptureFixture,
) -> None:
    """A refused connection: the pool logs each attempt; none carries the password."""
    password = f"Pw@{SECRET}"
    make_role(password)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://u:{quote(password, safe='')}@127.0.0.1:{port}/test"
    with (
        PostgresStore(url, schema="nowhere") as store,
        pytest.raises(StoreUnavailableError) as caught,
    ):
        store.get_meta("r")
    assert not _leaks(str(caught.value), password)
    assert pg_logs.records, "the pool logged no connection attempt"
    # Whatever a driver message quotes, the loggers' filter masks the password.
    logging.getLogger("psycopg.pool").warning("echo %s", password)
    logged = "\n".join(record.getMessage() for record in pg_logs.records)
    assert not _leaks(logged, password), logged
    assert "echo ***" in logged
