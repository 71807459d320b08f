"""No link planted inside a file store's root leads outside it (T10, issue 21 item 2).

``root/evil -> /outside`` made ``append("evil")`` write
``/outside/journal.jsonl``, ``put("evil/x")`` create ``/outside/blobs/x``,
``delete("evil")`` remove files outside, and a linked blob returned another
file's bytes. Now every call that would pass through a link raises a
non-retryable ``ConfigError`` and the target is left byte for byte as it was;
listings skip a linked run folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pytest

from rulvar_store import FileTranscriptStore, JsonlFileStore
from rulvar_store.errors import ConfigError
from tests.file_store._calls import Call, run_folder_calls


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    (folder / "blobs").mkdir(parents=True)
    (folder / "journal.jsonl").write_bytes(b'{"seq": 1, "secret": true}\n')
    (folder / "meta.json").write_bytes(b'{"runId": "evil", "status": "secret"}\n')
    (folder / "blobs" / "x").write_bytes(b"secret blob")
    (folder / "secret").write_bytes(b"secret file")
    return folder


def _stores(root: Path) -> tuple[JsonlFileStore, FileTranscriptStore]:
    journal, blobs = JsonlFileStore(root), FileTranscriptStore(root)
    journal.append("run", {"seq": 0})
    journal.put_meta({"runId": "run", "status": "running"})
    blobs.put("run/a", b"a")
    return journal, blobs


RUN_FOLDER_CALLS: Final = run_folder_calls("evil")


@pytest.mark.clause("T10")
@pytest.mark.parametrize("call", list(RUN_FOLDER_CALLS))
def test_a_linked_run_folder_is_refused_by_every_call(
    tmp_path: Path, outside: Path, call: str
) -> None:
    root = tmp_path / "root"
    journal, blobs = _stores(root)
    (root / "evil").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    with pytest.raises(ConfigError, match="symbolic link") as caught:
        RUN_FOLDER_CALLS[call](journal, blobs)
    assert not caught.value.retryable
    assert _snapshot(outside) == before


@pytest.mark.clause("T10")
def test_listings_skip_a_linked_run_folder(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    journal, _ = _stores(root)
    (root / "evil").symlink_to(outside, target_is_directory=True)
    assert [meta["runId"] for meta in journal.list_runs()] == ["run"]
    assert journal.run_ids() == ["run"]


INSIDE_RUN_CALLS: dict[str, tuple[str, Call]] = {
    "append through a linked journal": (
        "journal.jsonl",
        lambda j, b: j.append("run", {"seq": 5}),
    ),
    "load of a linked journal": ("journal.jsonl", lambda j, b: j.load("run")),
    "get_meta of a linked meta": ("meta.json", lambda j, b: j.get_meta("run")),
    "blob put into linked blobs": ("blobs", lambda j, b: b.put("run/x", b"mine")),
    "blob list of linked blobs": ("blobs", lambda j, b: b.list_refs("run")),
    "blob get of linked blobs": ("blobs", lambda j, b: b.get("run/x")),
    "blob get of a linked blob": ("blobs/a", lambda j, b: b.get("run/a")),
    "blob list of a linked blob": ("blobs/a", lambda j, b: b.list_refs("run")),
    "blob delete of a linked blob": ("blobs/a", lambda j, b: b.delete("run/a")),
}

_TARGETS = {
    "journal.jsonl": "journal.jsonl",
    "meta.json": "meta.json",
    "blobs": "blobs",
    "blobs/a": "secret",
}


@pytest.mark.clause("T10")
@pytest.mark.parametrize("call", list(INSIDE_RUN_CALLS))
def test_a_linked_file_or_folder_inside_a_run_is_refused(
    tmp_path: Path, outside: Path, call: str
) -> None:
    root = tmp_path / "root"
    journal, blobs = _stores(root)
    name, run = INSIDE_RUN_CALLS[call]
    planted = root / "run" / name
    if planted.is_dir():
        for item in planted.iterdir():
            item.unlink()
        planted.rmdir()
    else:
        planted.unlink()
    os.symlink(outside / _TARGETS[name], planted)
    journal = JsonlFileStore(root)  # no cached tail of the file it replaced
    before = _snapshot(outside)
    with pytest.raises(ConfigError) as caught:
        run(journal, blobs)
    assert not caught.value.retryable
    assert _snapshot(outside) == before


@pytest.mark.clause("T10")
def test_put_meta_replaces_a_linked_meta_and_never_writes_through_it(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    journal, _ = _stores(root)
    (root / "run" / "meta.json").unlink()
    (root / "run" / "meta.json").symlink_to(outside / "meta.json")
    before = _snapshot(outside)
    journal.put_meta({"runId": "run", "status": "done"})
    assert not (root / "run" / "meta.json").is_symlink()
    assert journal.get_meta("run") == {"runId": "run", "status": "done"}
    assert _snapshot(outside) == before
