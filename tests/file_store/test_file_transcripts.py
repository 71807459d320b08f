"""FileTranscriptStore: blob files under the run directory, safe refs, T1-T5, T8.

White-box: rulvar_store._file_io (checks the file store's own path confinement helper).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rulvar_store import (
    ContractError,
    FileTranscriptStore,
    JournalOrderViolation,
    Lease,
)
from rulvar_store._file_io import under_root


@pytest.fixture
def blobs(root: Path) -> FileTranscriptStore:
    return FileTranscriptStore(root)


@pytest.mark.clause("T1")
def test_blob_round_trips_exactly_and_put_overwrites(
    blobs: FileTranscriptStore, root: Path
) -> None:
    """Opaque bytes come back as written; a second put replaces the first."""
    payload = bytes(range(256)) * 3
    blobs.put("run/ckpt/7", payload)
    assert blobs.get("run/ckpt/7") == payload
    blobs.put("run/ckpt/7", b"")
    assert blobs.get("run/ckpt/7") == b""
    assert (root / "run" / "blobs" / "ckpt" / "7").read_bytes() == b""
    assert sorted(p.name for p in (root / "run" / "blobs" / "ckpt").iterdir()) == ["7"]


@pytest.mark.clause("D3")
def test_bytes_like_input_is_copied_and_returned_as_bytes(
    blobs: FileTranscriptStore,
) -> None:
    """Mutating a bytearray after put changes nothing stored; get returns bytes."""
    data = bytearray(b"abc")
    blobs.put("run/a", data)
    data[0] = ord("x")
    blobs.put("run/b", memoryview(b"xyz")[1:])
    assert blobs.get("run/a") == b"abc"
    assert type(blobs.get("run/a")) is bytes
    assert blobs.get("run/b") == b"yz"


@pytest.mark.clause("D3")
@pytest.mark.parametrize("blob", ["text", 3, None, [1, 2]], ids=repr)
def test_non_bytes_blob_raises_contract_error_and_writes_nothing(
    blobs: FileTranscriptStore, root: Path, blob: object
) -> None:
    """Only bytes, bytearray and memoryview are blobs."""
    with pytest.raises(ContractError):
        blobs.put("run/a", blob)  # type: ignore[arg-type]  # the bad input under test
    assert not root.exists()


@pytest.mark.clause("T2")
def test_missing_ref_reads_none_and_deletes_as_no_op(
    blobs: FileTranscriptStore, root: Path
) -> None:
    """get of a missing ref is None; delete of one is a no-op, lease or not."""
    assert blobs.get("run/missing") is None
    blobs.delete("run/missing")
    blobs.delete("run/missing", Lease("run", "owner", 1))
    blobs.put("run/a", b"1")
    assert blobs.get("run/a/deeper") is None
    assert blobs.get("run/a/deeper/still") is None
    blobs.delete("run/a/deeper")
    assert blobs.get("run/a") == b"1"


@pytest.mark.clause("T4")
def test_list_refs_is_sorted_and_limited_to_the_run_prefix(
    blobs: FileTranscriptStore,
) -> None:
    """Refs under run_id + '/' only, sorted as strings, across nested folders."""
    for ref in ("run/t2", "run/ckpt/10", "run/ckpt/2", "run/a-b", "run/t1", "run2/x"):
        blobs.put(ref, ref.encode())
    assert blobs.list_refs("run") == sorted(
        ["run/t2", "run/ckpt/10", "run/ckpt/2", "run/a-b", "run/t1"]
    )
    assert blobs.list_refs("run2") == ["run2/x"]
    assert blobs.list_refs("ru") == []
    assert blobs.list_refs("unknown") == []


@pytest.mark.clause("T4")
def test_slashless_ref_equal_to_the_run_id_is_stored_but_never_listed(
    blobs: FileTranscriptStore, root: Path
) -> None:
    """The ref '<runId>' lives at <root>/<runId>/run.blob, outside blobs/."""
    blobs.put("run", b"whole-run blob")
    blobs.put("run/t0", b"t0")
    assert blobs.get("run") == b"whole-run blob"
    assert blobs.list_refs("run") == ["run/t0"]
    assert (root / "run" / "run.blob").read_bytes() == b"whole-run blob"
    blobs.delete("run")
    assert blobs.get("run") is None
    assert blobs.get("run/t0") == b"t0"


@pytest.mark.clause("T8")
def test_temp_files_are_never_listed(blobs: FileTranscriptStore, root: Path) -> None:
    """A temp file a crash left behind carries '~' and is never a ref."""
    blobs.put("run/t0", b"t0")
    (root / "run" / "blobs" / "t1~0123abcd.tmp").write_bytes(b"half")
    assert blobs.list_refs("run") == ["run/t0"]


@pytest.mark.clause("T1")
def test_a_ref_cannot_be_both_a_blob_and_a_folder(
    blobs: FileTranscriptStore,
) -> None:
    """r/a beside r/a/b is refused typed and changes nothing; deleting frees the name."""
    blobs.put("run/ckpt/1", b"1")
    with pytest.raises(ContractError):
        blobs.put("run/ckpt", b"x")
    blobs.put("run/t0", b"t0")
    with pytest.raises(ContractError):
        blobs.put("run/t0/more", b"x")
    assert blobs.list_refs("run") == ["run/ckpt/1", "run/t0"]
    blobs.delete("run/ckpt")  # a folder is not a blob: no-op
    assert blobs.get("run/ckpt/1") == b"1"
    blobs.delete("run/ckpt/1")  # the emptied folder goes too
    blobs.put("run/ckpt", b"now a blob")
    assert blobs.list_refs("run") == ["run/ckpt", "run/t0"]


@pytest.mark.clause("T5")
def test_deleting_blobs_never_touches_the_journal_files(
    blobs: FileTranscriptStore, root: Path
) -> None:
    """Blob deletes prune only folders below blobs/."""
    (root / "run").mkdir(parents=True)
    (root / "run" / "journal.jsonl").write_bytes(b'{"seq":0}\n')
    blobs.put("run/x/y/z", b"1")
    blobs.delete("run/x/y/z")
    assert (root / "run" / "journal.jsonl").exists()
    assert (root / "run" / "blobs").is_dir()
    assert list((root / "run" / "blobs").iterdir()) == []


UNSAFE_REFS = [
    "",
    "/",
    "/run",
    "run/",
    "run//x",
    "run/./x",
    "run/../x",
    "../x",
    ".",
    "..",
    "run/a b",
    "run/é",
    "run/back\\slash",
    "run/nul\x00",
    "run/" + "x" * 201,
    "x" * 201 + "/a",
]


@pytest.mark.clause("T8")
@pytest.mark.parametrize("ref", UNSAFE_REFS, ids=repr)
def test_unsafe_refs_raise_and_touch_nothing(root: Path, ref: str) -> None:
    """Every blob operation refuses an unsafe segment before touching the disk."""
    blobs = FileTranscriptStore(root)
    calls: list[Callable[[], object]] = [
        lambda: blobs.put(ref, b"x"),
        lambda: blobs.get(ref),
        lambda: blobs.delete(ref),
    ]
    for call in calls:
        with pytest.raises(JournalOrderViolation):
            call()
    assert not root.exists()
    assert list(root.parent.iterdir()) == []


@pytest.mark.clause("T8")
@pytest.mark.parametrize("run_id", [".", "..", "", "a/b", "../x"], ids=repr)
def test_list_refs_refuses_unsafe_run_ids(root: Path, run_id: str) -> None:
    """list_refs('.') and list_refs('..') would list outside the run."""
    with pytest.raises(JournalOrderViolation):
        FileTranscriptStore(root).list_refs(run_id)
    assert not root.exists()


@pytest.mark.clause("T8")
def test_paths_that_would_leave_the_root_are_refused(tmp_path: Path) -> None:
    """The last-line path guard refuses anything resolving outside the root."""
    for segments in (("..", "x"), (".",), ("a", "..", "..", "b")):
        with pytest.raises(JournalOrderViolation):
            under_root(tmp_path, *segments)
    assert under_root(tmp_path, "a", "b") == tmp_path / "a" / "b"


@pytest.mark.clause("T8")
def test_lease_arguments_are_ignored(blobs: FileTranscriptStore) -> None:
    """Single-writer: a lease naming another run neither guards nor refuses."""
    foreign = Lease("other-run", "owner", 3)
    blobs.put("run/a", b"1", foreign)
    blobs.delete("run/a", foreign)
    assert blobs.get("run/a") is None
