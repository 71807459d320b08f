"""The sqlite:// backend: registration, URL forms, options, certify, lazy driver import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rulvar_store import ConfigError, list_backends, open_store
from rulvar_store.backend import parse_store_url
from rulvar_store_sqlite import SqliteStore
from rulvar_store_sqlite._plugin import _certify


def test_sqlite_backend_is_registered_with_its_capabilities() -> None:
    """Listed by name with the four capabilities, needing apsw from the sqlite extra."""
    infos = {info.backend.name: info for info in list_backends()}
    backend = infos["sqlite"].backend
    assert backend.schemes == ("sqlite",)
    assert backend.capabilities == {
        "leases",
        "meta_lookup",
        "fenced_writes",
        "fenced_transcripts",
    }
    assert backend.requires == ("apsw",)
    assert backend.extra == "sqlite"
    assert infos["sqlite"].installed


def test_plugin_module_does_not_import_the_driver() -> None:
    """Listing backends works without apsw: the plugin imports it only to open."""
    code = (
        "import sys, rulvar_store_sqlite._plugin; from rulvar_store import list_backends; "
        "list_backends(); print('apsw' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_relative_absolute_and_memory_urls_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite:///rel.db is cwd-relative, sqlite:////abs.db absolute, :memory: private."""
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///relative.db?ttl_ms=1234") as opened:
        assert isinstance(opened.journal, SqliteStore)
        assert opened.journal.path == str(tmp_path / "relative.db")
        assert opened.journal.lease_ttl_ms == 1234
        assert opened.transcripts is opened.journal.transcripts()
    absolute = tmp_path / "sub" / "absolute.db"
    absolute.parent.mkdir()
    url = f"sqlite:///{absolute}?busy_timeout_ms=50&synchronous=NORMAL"
    with open_store(url) as opened:
        assert isinstance(opened.journal, SqliteStore)
        assert opened.journal.path == str(absolute)
        assert opened.journal.busy_timeout_ms == 50
        assert opened.journal.synchronous == "NORMAL"
    with open_store("sqlite://:memory:", ttl_ms=99) as opened:
        assert isinstance(opened.journal, SqliteStore)
        assert opened.journal.path == ":memory:"
        assert opened.journal.lease_ttl_ms == 99


def test_group_commit_is_a_url_option(tmp_path: Path) -> None:
    """On by default; ``group_commit=false`` in the query string turns it off."""
    with open_store(f"sqlite:///{tmp_path / 'on.db'}") as opened:
        assert isinstance(opened.journal, SqliteStore)
        assert opened.journal.group_commit is True
    with open_store(f"sqlite:///{tmp_path / 'off.db'}?group_commit=false") as opened:
        assert isinstance(opened.journal, SqliteStore)
        assert opened.journal.group_commit is False
        assert opened.journal._group is None


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://relative.db",
        "sqlite://",
        "sqlite:///",
        "sqlite:///x.db?unknown=1",
        "sqlite:///x.db?ttl_ms=abc",
        "sqlite:///x.db?ttl_ms=0",
        "sqlite:///x.db?synchronous=OFF",
        "sqlite:///x.db?busy_timeout_ms=-1",
        "sqlite:///x.db?group_commit=sometimes",
    ],
)
def test_bad_urls_raise_config_error_and_create_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Malformed locations and options are refused before any file exists."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError):
        open_store(url)
    assert os.listdir(tmp_path) == []


def test_certify_yields_fresh_files_next_to_the_url_and_cleans_up(
    tmp_path: Path,
) -> None:
    """Each location is a new isolated file in a scratch dir that is removed."""
    url = parse_store_url(f"sqlite:///{tmp_path / 'target.db'}")
    with _certify(url) as locations:
        first, second = locations(), locations()
        assert first.features == {"shared", "clock", "processes", "contention"}
        a, b = first.open(), second.open(250)
        assert isinstance(a.journal, SqliteStore)
        assert isinstance(b.journal, SqliteStore)
        a.journal.append("run", {"seq": 0})
        assert b.journal.load("run") == []
        assert b.journal.lease_ttl_ms == 250
        with first.open(fail_fast=True) as again:
            assert again.journal.load("run") == [{"seq": 0}]
            assert isinstance(again.journal, SqliteStore)
            assert again.journal.busy_timeout_ms < 1_000
        scratch = Path(a.journal.path).parent
        assert scratch.parent == tmp_path
        a.close()
        b.close()
        first.remove()
        assert not Path(a.journal.path).exists()
    assert not scratch.exists()
    assert not (tmp_path / "target.db").exists()


def test_certify_for_memory_uses_a_temp_dir() -> None:
    """sqlite://:memory: certifies over fresh temp files, removed afterwards."""
    with (
        _certify(parse_store_url("sqlite://:memory:")) as locations,
        locations().open() as opened,
    ):
        assert isinstance(opened.journal, SqliteStore)
        scratch = Path(opened.journal.path).parent
        assert scratch.exists()
    assert not scratch.exists()
