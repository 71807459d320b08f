"""One gate for every PostgreSQL test: the server's URL, or skip with the reason.

``RULVAR_TEST_POSTGRES_URL`` (or ``RULVAR_POSTGRES_URL``) names the server. Without
a reachable one the calling test SKIPS locally with the reason; under ``CI=true``
it FAILS instead, so a CI job can never go green by silently skipping the fleet
backend (CONTRACT P10).
"""

from __future__ import annotations

import os
from typing import Final, NoReturn

import pytest

__all__ = ["URL_ENV_VARS", "in_ci", "postgres_url"]

URL_ENV_VARS: Final = ("RULVAR_TEST_POSTGRES_URL", "RULVAR_POSTGRES_URL")


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``), where a missing server is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _unavailable(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def postgres_url() -> str:
    """The test server's URL once it answered ``SELECT 1``; else skip (fail in CI)."""
    import psycopg

    url = next((os.environ[name] for name in URL_ENV_VARS if os.environ.get(name)), "")
    if not url:
        _unavailable(
            "no PostgreSQL server: set RULVAR_TEST_POSTGRES_URL, e.g. "
            "postgresql://postgres@127.0.0.1:5432/test"
        )
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unavailable(f"PostgreSQL at RULVAR_TEST_POSTGRES_URL is unreachable: {exc}")
    return url
