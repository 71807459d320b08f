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
