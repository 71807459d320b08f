"""A regular file where the file store's root or a run folder belongs (issue 21 item 11).

Reads used to see no run (``get_meta`` None, blob ``get`` None) while writes
raised a retryable ``StoreUnavailableError`` that no retry could fix. Now
every call raises the same non-retryable ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import FileTranscriptStore, JsonlFileStore
from rulvar_store.errors import ConfigError

Call = Callable[[JsonlFileStore, FileTranscriptStore], Any]

CALLS: dict[str, Call] = {
    "append": lambda j, b: j.append("run", {"seq": 1}),
    "load": lambda j, b: j.load("run"),
    "load_since": lambda j, b: j.load_since("run"),
    "put_meta": lambda j, b: j.put_meta({"runId": "run", "status": "x"}),
    "get_meta": lambda j, b: j.get_meta("run"),
    "delete": lambda j, b: j.delete("run"),
    "blob put": lambda j, b: b.put("run/x", b"1"),
    "blob put run ref": lambda j, b: b.put("run", b"1"),
    "blob get": lambda j, b: b.get("run/x"),
    "blob list": lambda j, b: b.list_refs("run"),
    "blob delete": lambda j, b: b.delete("run/x"),
}


def _file_as_run_folder(root: Path) -> None:
    root.mkdir()
    (root / "run").write_bytes(b"not a folder")


def _file_as_root(root: Path) -> None:
    root.write_bytes(b"not a folder")  # after the stores opened


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize(
    "plant", [_file_as_run_folder, _file_as_root], ids=["run-folder", "root"]
)
def test_reads_and_writes_refuse_alike(
    tmp_path: Path, call: str, plant: Callable[[Path], None]
) -> None:
    root = tmp_path / "store"
    journal, blobs = JsonlFileStore(root), FileTranscriptStore(root)
    plant(root)
    with pytest.raises(ConfigError) as caught:
        CALLS[call](journal, blobs)
    assert not caught.value.retryable
