"""Constructor intake (Q1, D9): bad options raise ConfigError before the file exists."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import ConfigError
from rulvar_store_sqlite import DEFAULT_BUSY_TIMEOUT_MS, SqliteStore


@pytest.mark.clause("Q1")
@pytest.mark.clause("D9")
@pytest.mark.parametrize(
    "options",
    [
        {"ttl_ms": 0},
        {"ttl_ms": -5},
        {"ttl_ms": True},
        {"ttl_ms": 1.5},
        {"ttl_ms": 2_147_483_648},
        {"busy_timeout_ms": -1},
        {"busy_timeout_ms": False},
        {"busy_timeout_ms": "100"},
        {"synchronous": "OFF"},
        {"synchronous": 2},
        {"now": 12},
    ],
    ids=repr,
)
def test_bad_option_raises_config_error_before_the_file_is_created(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    """Nothing is created on disk when an option is invalid."""
    path = tmp_path / "never.db"
    with pytest.raises(ConfigError):
        SqliteStore(str(path), **options)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("path", ["", None, 7, "bad\x00name.db"], ids=repr)
def test_bad_path_raises_config_error(path: Any) -> None:
    """The path must be a non-empty str or path-like."""
    with pytest.raises(ConfigError):
        SqliteStore(path)


def test_unopenable_path_raises_config_error(tmp_path: Path) -> None:
    """A database under a missing directory is a setup error, typed."""
    with pytest.raises(ConfigError):
        SqliteStore(str(tmp_path / "missing" / "dir" / "store.db"))


def test_defaults_and_path_like(tmp_path: Path) -> None:
    """ttl 60 s, busy timeout well below it, FULL; a pathlib.Path is accepted."""
    with SqliteStore(tmp_path / "store.db") as store:  # type: ignore[arg-type]  # PathLike accepted
        assert store.lease_ttl_ms == 60_000
        assert store.busy_timeout_ms == DEFAULT_BUSY_TIMEOUT_MS == 5_000
        assert store.synchronous == "FULL"
        assert store.path == str(tmp_path / "store.db")
