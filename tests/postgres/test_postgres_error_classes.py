"""Permanent and retryable told apart: settings that cannot work are ConfigErrors.

A connection that could not be made sent nothing, so it is never reported as a
connection "dropped mid-call" with an unknown outcome; when no retry can help
(an option value libpq rejects, a socket directory that does not exist, a host
name that does not resolve, a read-only handle on a schema without a store) the
error is a permanent ``ConfigError`` (the CLI's exit 2).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rulvar_store.errors import ConfigError, StoreUnavailableError
from rulvar_store_postgres import PostgresStore
from rulvar_store_postgres._errors import translated
from rulvar_store_postgres._pool import ConnectFailed

pytestmark = pytest.mark.postgres


def _first_call_error(url: str, **options: object) -> BaseException:
    store = PostgresStore(url, connect_timeout_s=2, **options)  # type: ignore[arg-type]  # test options
    try:
        store.get_meta("r")
    except Exception as exc:
        return exc
    finally:
        store.close()
    pytest.fail("the first call succeeded")


@pytest.mark.clause("P1")
@pytest.mark.parametrize(
    "query",
    [
        "sslmode=bogus",
        "target_session_attrs=bogus",
        "host=/nonexistent/rulvar-socket-dir",
    ],
)
def test_settings_that_cannot_connect_are_config_errors(
    pg_url: str, query: str
) -> None:
    """libpq refuses the value (or the socket directory is missing): nothing was sent."""
    error = _first_call_error(f"{pg_url}?{query}")
    assert isinstance(error, ConfigError), repr(error)
    assert not error.retryable
    assert "nothing was sent" in str(error)
    assert "dropped mid-call" not in str(error)


@pytest.mark.clause("P1")
def test_an_unresolvable_host_is_a_config_error() -> None:
    """The text psycopg raises for a name that does not resolve is classified permanent.

    Driven through the translation with that exact text, not through a real
    lookup: resolving a name would send a query to a non-loopback resolver.
    """
    text = (
        "failed to resolve host 'nohost.invalid': [Errno -2] Name or service not known"
    )
    with pytest.raises(ConfigError, match="nothing was sent"), translated("boot", "x"):
        raise ConnectFailed(text)


@pytest.mark.clause("P7")
def test_a_refused_port_stays_retryable(pg_url: str) -> None:
    """A server that is not listening may come back: retryable, nothing was sent."""
    error = _first_call_error("postgresql://postgres@127.0.0.1:1/test")
    assert isinstance(error, StoreUnavailableError), repr(error)
    assert error.retryable
    assert "nothing was sent" in str(error)


@pytest.mark.clause("P1")
def test_a_readonly_handle_on_a_schema_without_a_store_is_a_config_error(
    pg_url: str, new_schema: Callable[[], str]
) -> None:
    """A mistyped schema for an observer is a wrong name, not a lost store."""
    error = _first_call_error(pg_url, schema=new_schema(), readonly=True)
    assert isinstance(error, ConfigError), repr(error)
    assert "holds no rulvar store" in str(error)


@pytest.mark.clause("P1")
def test_an_unknown_query_option_lists_the_store_options(pg_url: str) -> None:
    """A misspelt option names the store's own options beside libpq's refusal."""
    with pytest.raises(ConfigError, match="ttl_ms") as caught:
        PostgresStore(f"{pg_url}?tll_ms=5000")
    assert "the store's own options are" in str(caught.value)
