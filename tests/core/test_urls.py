"""Store URLs: parsing, options, credentials never shown."""

from __future__ import annotations

import pytest

from rulvar_store import ConfigError
from rulvar_store.backend import option_bool, option_int, parse_store_url, redact_url


def test_password_is_redacted() -> None:
    assert redact_url("postgresql://alice:s3cret@db:5432/x?schema=a") == (
        "postgresql://alice:***@db:5432/x?schema=a"
    )
    assert redact_url("sqlite:///runs.db") == "sqlite:///runs.db"


def test_keyword_options_override_the_query_string() -> None:
    url = parse_store_url("memory://?ttl_ms=5", {"ttl_ms": 7})
    assert url.scheme == "memory"
    assert url.options == {"ttl_ms": 7}


@pytest.mark.parametrize("bad", ["", "no-scheme", "runs.db", 42, None])
def test_malformed_urls_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse_store_url(bad)


def test_a_repeated_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="twice"):
        parse_store_url("memory://?ttl_ms=1&ttl_ms=2")


def test_typed_option_readers() -> None:
    assert option_int({"n": "12"}, "n", 0) == 12
    assert option_int({}, "n", 5) == 5
    assert option_bool({"b": "yes"}, "b", False) is True
    with pytest.raises(ConfigError):
        option_int({"n": "twelve"}, "n", 0)
    with pytest.raises(ConfigError):
        option_bool({"b": "maybe"}, "b", False)


_NOT_ASCII_DECIMAL = (
    " 5",
    "5 ",
    "+5",
    "\uff11\uff12",
    "5_000",
    "0x10",
    "",
    "5\n",
    "\u0661\u0662",
)


@pytest.mark.parametrize("text", _NOT_ASCII_DECIMAL)
def test_an_integer_option_takes_ascii_digits_only(text: str) -> None:
    """``int()`` takes all of these; a URL option must be readable one way only."""
    with pytest.raises(ConfigError, match="ASCII digits"):
        option_int({"n": text}, "n", 0)


@pytest.mark.parametrize("text", _NOT_ASCII_DECIMAL)
@pytest.mark.parametrize(
    "url",
    [
        "memory://?ttl_ms={}",
        "sqlite://:memory:?ttl_ms={}",
        "sqlite://:memory:?busy_timeout_ms={}",
    ],
)
def test_every_backend_refuses_a_non_ascii_integer_option(url: str, text: str) -> None:
    from urllib.parse import quote

    from rulvar_store import open_store

    with pytest.raises(ConfigError, match="ASCII digits"):
        open_store(url.format(quote(text)))


def test_a_plain_or_negative_integer_option_still_parses() -> None:
    assert option_int({"n": "007"}, "n", 0) == 7
    assert option_int({"n": "-3"}, "n", 0) == -3  # its range check names it


@pytest.mark.parametrize("text", _NOT_ASCII_DECIMAL)
@pytest.mark.parametrize("name", ["ttl_ms", "pool_max_size", "lock_timeout_ms"])
def test_postgres_settings_refuse_a_non_ascii_integer_option(
    name: str, text: str
) -> None:
    """PostgreSQL reads its integer options with the same parser (no connection made)."""
    from urllib.parse import quote

    pytest.importorskip("psycopg")
    from rulvar_store_postgres._config import resolve_settings

    with pytest.raises(ConfigError, match="ASCII digits"):
        resolve_settings(f"postgresql://u@127.0.0.1/db?{name}={quote(text)}", {})
