"""What the stores create is owner-only unless ``private=false`` says otherwise (issue 21 item 14).

Databases, journals, metas and blobs hold prompts and tool outputs; under the
usual umask 022 they were created world-readable (0644). Now the SQLite file
with its ``-wal`` and ``-shm``, and the file store's folders and files, are
0600 / 0700 by default; the URL option ``private=false`` (or the keyword) hands
the mode back to the umask, and any other value is a ``ConfigError``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulvar_store import ConfigError, open_store


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _modes(folder: Path) -> dict[str, int]:
    return {
        str(path.relative_to(folder)): stat.S_IMODE(path.lstat().st_mode)
        for path in sorted(folder.rglob("*"))
    }


def _write_everything(url: str) -> None:
    opened = open_store(url)
    try:
        journal: object = opened.journal
        lease = journal.acquire("run", "w") if hasattr(journal, "acquire") else None
        opened.journal.append("run", {"seq": 0}, lease)
        opened.journal.put_meta({"runId": "run", "status": "running"}, lease)
        assert opened.transcripts is not None
        opened.transcripts.put("run/a/b", b"secret", lease)
        opened.transcripts.put("run", b"secret", lease)
    finally:
        opened.close()


def _sqlite_url(tmp_path: Path, query: str) -> str:
    return f"sqlite:///{tmp_path / 'db' / 'runs.db'}{query}"


def _file_url(tmp_path: Path, query: str) -> str:
    return f"{(tmp_path / 'db' / 'store').as_uri()}{query}"


@pytest.mark.parametrize("url", [_sqlite_url, _file_url], ids=["sqlite", "file"])
def test_everything_created_is_owner_only_by_default(
    tmp_path: Path, url: object
) -> None:
    (tmp_path / "db").mkdir()
    opened = open_store(url(tmp_path, ""))  # type: ignore[operator]
    try:
        if hasattr(opened.journal, "acquire"):
            # Keep a handle open so the -wal and -shm are there to look at.
            opened.journal.append("other", {"seq": 0})
        _write_everything(url(tmp_path, ""))  # type: ignore[operator]
        modes = _modes(tmp_path / "db")
    finally:
        opened.close()
    assert modes, "nothing was created"
    wrong = {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (0o700 if (tmp_path / "db" / name).is_dir() else 0o600)
    }
    assert wrong == {}
    if "runs.db" in modes:
        assert {"runs.db-wal", "runs.db-shm"} <= set(modes)


@pytest.mark.parametrize("url", [_sqlite_url, _file_url], ids=["sqlite", "file"])
def test_private_false_leaves_the_mode_to_the_umask(
    tmp_path: Path, url: object
) -> None:
    (tmp_path / "db").mkdir()
    _write_everything(url(tmp_path, "?private=false"))  # type: ignore[operator]
    modes = _modes(tmp_path / "db")
    assert modes
    for name, mode in modes.items():
        expected = 0o755 if (tmp_path / "db" / name).is_dir() else 0o644
        assert mode == expected, (name, oct(mode))


@pytest.mark.parametrize("url", [_sqlite_url, _file_url], ids=["sqlite", "file"])
def test_a_bad_private_value_is_a_config_error(tmp_path: Path, url: object) -> None:
    (tmp_path / "db").mkdir()
    with pytest.raises(ConfigError, match="private"):
        open_store(url(tmp_path, "?private=maybe"))  # type: ignore[operator]
    assert list((tmp_path / "db").iterdir()) == []


def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    open_store(f"sqlite:///{path}?private=false").close()
    os.chmod(path, 0o640)
    _write_everything(f"sqlite:///{path}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
