"""A regular file where the file store's root or a run folder belongs (issue 21 item 11).

Reads used to see no run (``get_meta`` None, blob ``get`` None) while writes
raised a retryable ``StoreUnavailableError`` that no retry could fix. Now
every call raises the same non-retryable ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from rulvar_store import FileTranscriptStore, JsonlFileStore
from rulvar_store.errors import ConfigError
from tests.file_store._calls import run_folder_calls

CALLS: Final = run_folder_calls("run")


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
