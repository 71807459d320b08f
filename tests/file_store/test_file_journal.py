"""JsonlFileStore: durable JSONL journals, torn-tail repair, meta files, safe names."""

from __future__ import annotations

import math
import pickle
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    CorruptFileError,
    FileTranscriptStore,
    JournalOrderViolation,
    JsonlFileStore,
    Lease,
    RunFilter,
    TornTail,
    assert_fenced_writes,
    has_fenced_writes,
    has_meta_lookup,
    open_store,
)


def _entry(seq: float, **extra: Any) -> dict[str, Any]:
    return {"hashVersion": 2, "seq": seq, "kind": "step", "status": "ok", **extra}


def _journal(root: Path, run_id: str = "run") -> Path:
    return root / run_id / "journal.jsonl"


@pytest.fixture
def store(root: Path) -> JsonlFileStore:
    return JsonlFileStore(root)


# -- layout and durability ----------------------------------------------------------


@pytest.mark.clause("J3")
def test_append_writes_one_compact_line_per_entry_in_the_run_directory(
    store: JsonlFileStore, root: Path
) -> None:
    """Each append is one JSON line with its newline under <root>/<runId>/."""
    store.append("run", _entry(0, value="δοκιμή"))
    store.append("run", _entry(1))
    lines = _journal(root).read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == 3
    assert store.load("run") == [_entry(0, value="δοκιμή"), _entry(1)]


@pytest.mark.clause("J5")
def test_load_of_unknown_run_returns_empty_and_creates_nothing(
    store: JsonlFileStore, root: Path
) -> None:
    """An unknown run loads as [] and reading never creates the root."""
    assert store.load("never-written") == []
    assert store.get_meta("never-written") is None
    assert store.list_runs() == []
    assert not root.exists()


@pytest.mark.clause("J6")
def test_append_with_a_seq_not_above_the_tail_raises_and_persists_nothing(
    store: JsonlFileStore, root: Path
) -> None:
    """J6 compares numerically against the max finite seq; gaps are legal."""
    store.append("run", _entry(0))
    store.append("run", _entry(5))
    before = _journal(root).read_bytes()
    for stale in (5, 4, 4.5, 0):
        with pytest.raises(JournalOrderViolation) as caught:
            store.append("run", _entry(stale))
        assert caught.value.run_id == "run"
    assert _journal(root).read_bytes() == before
    store.append("run", {"seq": True, "note": "bool is not a seq"})
    store.append("run", _entry(5.5))
    assert [e["seq"] for e in store.load("run")] == [0, 5, True, 5.5]


@pytest.mark.clause("J6")
def test_tail_is_rederived_when_another_handle_changed_the_file(root: Path) -> None:
    """A cached tail never hides appends, repairs or deletes made by another handle."""
    a = JsonlFileStore(root)
    b = JsonlFileStore(root)
    a.append("run", _entry(0))
    a.append("run", _entry(1))
    b.append("run", _entry(2))
    with pytest.raises(JournalOrderViolation):
        a.append("run", _entry(2))
    b.delete("run")
    a.append("run", _entry(0))
    assert b.load("run") == [_entry(0)]


def _race(root: Path, seq: int) -> list[str]:
    """Two fresh handles append the same seq at once; return their outcomes."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def racer(tag: str) -> None:
        handle = JsonlFileStore(root)
        barrier.wait()
        try:
            handle.append("run", _entry(seq, tag=tag))
            outcomes.append("ok")
        except JournalOrderViolation:
            outcomes.append("violation")

    threads = [threading.Thread(target=racer, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes)


@pytest.mark.clause("J6")
def test_two_handles_racing_one_seq_persist_exactly_one(root: Path) -> None:
    """The tail check and the write are one unit across handles (flock)."""
    JsonlFileStore(root).append("run", _entry(0))
    for seq in range(1, 21):
        assert _race(root, seq) == ["ok", "violation"]
    seqs = [entry["seq"] for entry in JsonlFileStore(root).load("run")]
    assert seqs == list(range(21))


@pytest.mark.clause("D2")
def test_non_json_entry_or_meta_persists_nothing(
    store: JsonlFileStore, root: Path
) -> None:
    """Serialization happens before anything is written (D2)."""
    with pytest.raises(TypeError):
        store.append("run", _entry(0, value={1, 2}))
    with pytest.raises(ValueError, match="JSON"):
        store.append("run", _entry(0, value=math.nan))
    with pytest.raises(TypeError):
        store.put_meta({"runId": "run", "status": "ok", "when": object()})
    assert not root.exists()


@pytest.mark.clause("D3")
def test_mutating_inputs_and_outputs_never_changes_history(
    store: JsonlFileStore,
) -> None:
    """Entries and metas are snapshots: later mutation changes nothing stored."""
    entry = _entry(0, value={"n": 1})
    store.append("run", entry)
    entry["value"]["n"] = 2
    store.load("run")[0]["value"]["n"] = 3
    meta: dict[str, Any] = {"runId": "run", "status": "running", "tags": ["a"]}
    store.put_meta(meta)
    meta["tags"].append("b")
    got = store.get_meta("run")
    assert got is not None
    got["tags"].append("c")
    assert store.load("run") == [_entry(0, value={"n": 1})]
    assert store.get_meta("run") == {"runId": "run", "status": "running", "tags": ["a"]}


def test_bad_entry_and_meta_shapes_raise_contract_errors(
    store: JsonlFileStore, root: Path
) -> None:
    """Non-dict entries and metas without a string runId are typed contract errors."""
    with pytest.raises(ContractError):
        store.append("run", [1, 2])  # type: ignore[arg-type]  # the bad input under test
    for meta in ({"status": "ok"}, {"runId": 7}, ["runId"]):
        with pytest.raises(ContractError):
            store.put_meta(meta)  # type: ignore[arg-type]  # the bad input under test
    assert not root.exists()


# -- torn tails and corruption -------------------------------------------------------


def _write_three(root: Path) -> bytes:
    store = JsonlFileStore(root)
    for seq in range(3):
        store.append("run", _entry(seq, value="ü" * seq))
    return _journal(root).read_bytes()


@pytest.mark.clause("J1")
@pytest.mark.parametrize(
    "tail",
    [
        b'{"seq":3,"val',
        b'{"seq":3}',
        b"\x00\x00\x00",
        b'{"seq":3,"v":"\xc3',
        b"{garbage\n",
    ],
    ids=["partial-json", "no-newline", "zeros", "split-utf8", "invalid-json-line"],
)
def test_torn_last_line_is_repaired_on_load_without_losing_complete_entries(
    root: Path, tail: bytes
) -> None:
    """A crash mid-append is truncated to the last complete line; appends go on."""
    complete = _write_three(root)
    with _journal(root).open("ab") as file:
        file.write(tail)
    store = JsonlFileStore(root)
    assert [e["seq"] for e in store.load("run")] == [0, 1, 2]
    assert _journal(root).read_bytes() == complete
    assert store.torn_tails() == [
        TornTail("run", str(_journal(root)), 4, len(complete), len(tail), True)
    ]
    store.append("run", _entry(3))
    assert [e["seq"] for e in JsonlFileStore(root).load("run")] == [0, 1, 2, 3]


@pytest.mark.clause("J1")
def test_every_cut_of_the_last_append_loads_the_complete_prefix(root: Path) -> None:
    """Whatever byte a crash stops at, exactly the acknowledged entries survive."""
    complete = _write_three(root)
    line = b'{"seq":3,"value":"\xe2\x98\x83 snow"}\n'
    for cut in range(len(line)):
        _journal(root).write_bytes(complete + line[:cut])
        store = JsonlFileStore(root)
        assert [e["seq"] for e in store.load("run")] == [0, 1, 2], cut
        assert _journal(root).read_bytes() == complete, cut


@pytest.mark.clause("J1")
def test_append_after_a_torn_tail_repairs_first_and_never_glues_lines(
    root: Path,
) -> None:
    """The first append over a torn tail truncates it before writing its own line."""
    complete = _write_three(root)
    with _journal(root).open("ab") as file:
        file.write(b'{"seq":3,"kind":"st')
    store = JsonlFileStore(root)
    store.append("run", _entry(3))
    assert (
        _journal(root).read_bytes()
        == complete + b'{"hashVersion":2,"seq":3,"kind":"step","status":"ok"}\n'
    )
    assert store.torn_tails()[0].repaired


@pytest.mark.clause("J1")
def test_read_only_mode_reports_a_torn_tail_and_leaves_the_file_byte_identical(
    root: Path,
) -> None:
    """repair=False returns complete entries, reports the tail, refuses to append."""
    _write_three(root)
    with _journal(root).open("ab") as file:
        file.write(b'{"seq":3,')
    before = _journal(root).read_bytes()
    store = JsonlFileStore(root, repair=False)
    assert [e["seq"] for e in store.load("run")] == [0, 1, 2]
    (report,) = store.torn_tails()
    assert (report.run_id, report.line, report.dropped_bytes, report.repaired) == (
        "run",
        4,
        len(b'{"seq":3,'),
        False,
    )
    with pytest.raises(CorruptFileError) as caught:
        store.append("run", _entry(3))
    assert caught.value.torn
    assert caught.value.line == 4
    assert _journal(root).read_bytes() == before
    JsonlFileStore(root).load("run")  # a repairing store fixes it
    assert [e["seq"] for e in store.load("run")] == [0, 1, 2]
    assert store.torn_tails() == []


@pytest.mark.clause("J1")
@pytest.mark.parametrize("repair", [True, False])
def test_corrupt_line_before_the_last_raises_naming_file_and_line(
    root: Path, repair: bool
) -> None:
    """Mid-file corruption is never a torn tail: typed error, nothing dropped."""
    complete = _write_three(root)
    lines = complete.split(b"\n")
    lines[1] = b'{"seq":1,"broken'
    _journal(root).write_bytes(b"\n".join(lines))
    before = _journal(root).read_bytes()
    store = JsonlFileStore(root, repair=repair)
    with pytest.raises(CorruptFileError) as caught:
        store.load("run")
    assert (caught.value.line, caught.value.path, caught.value.torn) == (
        2,
        str(_journal(root)),
        False,
    )
    assert f"{_journal(root)}:2" in str(caught.value)
    with pytest.raises(CorruptFileError):
        store.append("run", _entry(9))
    assert _journal(root).read_bytes() == before


@pytest.mark.clause("J1")
def test_a_line_that_is_not_an_object_is_corrupt(root: Path) -> None:
    """Complete JSON that is not an entry object is corruption, not a torn tail."""
    _journal(root).parent.mkdir(parents=True)
    _journal(root).write_bytes(b'{"seq":0}\n[1,2]\n')
    with pytest.raises(CorruptFileError) as caught:
        JsonlFileStore(root).load("run")
    assert caught.value.line == 2


def test_corrupt_file_error_pickles_with_its_fields() -> None:
    """Children report errors across processes, so fields survive pickling."""
    error = CorruptFileError("bad", "run", "/x/journal.jsonl", 3, True)
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, CorruptFileError)
    assert (copy.run_id, copy.path, copy.line, copy.torn) == (
        "run",
        "/x/journal.jsonl",
        3,
        True,
    )
    assert copy.to_wire()["data"] == {
        "runId": "run",
        "path": "/x/journal.jsonl",
        "line": 3,
        "torn": True,
    }


# -- meta ------------------------------------------------------------------------------


@pytest.mark.clause("M1")
def test_list_runs_reads_meta_files_only_ordered_by_run_id(
    store: JsonlFileStore, root: Path
) -> None:
    """A corrupt journal never disturbs list_runs; order is by runId; filters apply."""
    for run_id, status in (("b", "running"), ("a", "ok"), ("c", "running")):
        store.put_meta({"runId": run_id, "status": status, "tags": [run_id]})
    _journal(root, "b").write_bytes(b"not json\nat all\n")
    (root / "blobs-only" / "blobs").mkdir(parents=True)
    (root / "stray-file").write_text("x")
    assert [m["runId"] for m in store.list_runs()] == ["a", "b", "c"]
    assert [m["runId"] for m in store.list_runs(RunFilter(status="running"))] == [
        "b",
        "c",
    ]
    assert [m["runId"] for m in store.list_runs(RunFilter(tags=["c"]))] == ["c"]


@pytest.mark.clause("M2")
def test_put_meta_replaces_the_whole_record_atomically(
    store: JsonlFileStore, root: Path
) -> None:
    """Upsert without merge; no temp file is left beside meta.json."""
    store.put_meta({"runId": "run", "status": "running", "name": "wf"})
    store.put_meta({"runId": "run", "status": "ok"})
    assert store.get_meta("run") == {"runId": "run", "status": "ok"}
    assert sorted(p.name for p in (root / "run").iterdir()) == ["meta.json"]


@pytest.mark.clause("M5")
def test_get_meta_agrees_with_list_runs_and_returns_none_for_missing(
    store: JsonlFileStore,
) -> None:
    """get_meta is the point lookup; a missing run is None."""
    assert has_meta_lookup(store)
    meta = {"runId": "run", "status": "ok", "unknownKey": {"kept": [1.5, None]}}
    store.put_meta(meta)
    assert store.get_meta("run") == meta == store.list_runs()[0]
    assert store.get_meta("missing-run") is None


@pytest.mark.clause("M1")
def test_corrupt_meta_file_raises_typed(store: JsonlFileStore, root: Path) -> None:
    """A meta file that is not a JSON object names itself in a typed error."""
    (root / "run").mkdir(parents=True)
    (root / "run" / "meta.json").write_bytes(b"{oops")
    with pytest.raises(CorruptFileError) as caught:
        store.get_meta("run")
    assert caught.value.path == str(root / "run" / "meta.json")


@pytest.mark.clause("M6")
def test_delete_removes_journal_and_meta_but_keeps_blobs(root: Path) -> None:
    """delete never cascades into blobs (T5), including the slashless one."""
    store = JsonlFileStore(root)
    blobs = FileTranscriptStore(root)
    store.append("run", _entry(0))
    store.put_meta({"runId": "run", "status": "ok"})
    blobs.put("run/ckpt/0", b"checkpoint")
    blobs.put("run", b"run blob")
    store.delete("run")
    assert store.load("run") == []
    assert store.get_meta("run") is None
    assert store.list_runs() == []
    assert blobs.list_refs("run") == ["run/ckpt/0"]
    assert blobs.get("run/ckpt/0") == b"checkpoint"
    assert blobs.get("run") == b"run blob"
    assert not _journal(root).exists()
    assert not (root / "run" / "meta.json").exists()


@pytest.mark.clause("M6")
def test_delete_of_a_run_without_blobs_leaves_no_directory(
    store: JsonlFileStore, root: Path
) -> None:
    """A run without blobs leaves nothing behind; unknown runs are a no-op."""
    store.append("run", _entry(0))
    store.put_meta({"runId": "run", "status": "ok"})
    store.delete("run")
    store.delete("run")
    store.delete("never-existed")
    assert list(root.iterdir()) == []
    store.append("run", _entry(0))  # recreating starts a fresh journal
    assert store.load("run") == [_entry(0)]


def _interrupted_delete(root: Path) -> None:
    """Leave the state of a delete that died after its intent, before any unlink."""
    store = JsonlFileStore(root)
    store.append("run", _entry(0))
    store.put_meta({"runId": "run", "status": "ok"})
    (root / "run" / "delete~intent").touch()


@pytest.mark.clause("M6")
def test_an_interrupted_delete_is_finished_by_the_next_call(root: Path) -> None:
    """After a death past the delete's intent, every reader sees the run deleted."""
    _interrupted_delete(root)
    store = JsonlFileStore(root)
    assert store.list_runs() == []
    assert store.get_meta("run") is None
    assert store.load("run") == []
    assert list(root.iterdir()) == []
    store.append("run", _entry(0))  # the run starts afresh
    assert store.load("run") == [_entry(0)]


@pytest.mark.clause("M6")
def test_an_interrupted_delete_without_repair_reads_deleted_and_refuses_writes(
    root: Path,
) -> None:
    """With repair off nothing is modified: reads see no run, writes are refused."""
    _interrupted_delete(root)
    store = JsonlFileStore(root, repair=False)
    assert store.load("run") == []
    assert store.get_meta("run") is None
    assert store.list_runs() == []
    with pytest.raises(CorruptFileError, match="interrupted"):
        store.append("run", _entry(1))
    with pytest.raises(CorruptFileError, match="interrupted"):
        store.put_meta({"runId": "run", "status": "running"})
    assert (root / "run" / "meta.json").exists()
    assert _journal(root).exists()


# -- names, capabilities, lifecycle ----------------------------------------------------

UNSAFE_RUN_IDS = [
    "",
    ".",
    "..",
    "/",
    "a/b",
    "../escape",
    "a b",
    "tab\t",
    "nul\x00",
    "é",
    "back\\slash",
    "x" * 201,
]


@pytest.mark.clause("T9")
@pytest.mark.parametrize("run_id", UNSAFE_RUN_IDS, ids=repr)
def test_unsafe_run_ids_raise_and_touch_nothing(root: Path, run_id: str) -> None:
    """Every journal operation refuses an unsafe run id before touching the disk."""
    store = JsonlFileStore(root)
    calls: list[Callable[[], object]] = [
        lambda: store.append(run_id, _entry(0)),
        lambda: store.load(run_id),
        lambda: store.put_meta({"runId": run_id, "status": "ok"}),
        lambda: store.get_meta(run_id),
        lambda: store.delete(run_id),
    ]
    for call in calls:
        with pytest.raises(JournalOrderViolation):
            call()
    assert not root.exists()
    assert list(root.parent.iterdir()) == []


@pytest.mark.clause("T9")
def test_longest_safe_run_id_is_accepted(store: JsonlFileStore) -> None:
    """200 characters from the safe alphabet make a valid run id."""
    run_id = "A-z_0.9" * 28 + "abcd"
    assert len(run_id) == 200
    store.append(run_id, _entry(0))
    assert store.load(run_id) == [_entry(0)]


@pytest.mark.clause("J8")
def test_lease_arguments_are_accepted_and_ignored(store: JsonlFileStore) -> None:
    """Single-writer: a lease, even for another run, neither guards nor refuses."""
    foreign = Lease("other-run", "owner", 7)
    store.append("run", _entry(0), foreign)
    store.put_meta({"runId": "run", "status": "ok"}, foreign)
    store.delete("run", foreign)
    assert store.load("run") == []


@pytest.mark.clause("X5")
def test_file_stores_never_declare_fenced_writes(root: Path) -> None:
    """assert_fenced_writes refuses both file stores, naming each."""
    journal = JsonlFileStore(root)
    transcripts = FileTranscriptStore(root)
    assert not has_fenced_writes(journal)
    assert not has_fenced_writes(transcripts)
    with pytest.raises(ConfigError) as caught:
        assert_fenced_writes(journal, transcripts)
    assert "JsonlFileStore" in str(caught.value)
    assert "FileTranscriptStore" in str(caught.value)


def test_bad_constructor_arguments_raise_config_error(root: Path) -> None:
    """A non-path root or non-bool repair flag is a setup mistake."""
    with pytest.raises(ConfigError):
        JsonlFileStore(42)  # type: ignore[arg-type]  # the bad input under test
    with pytest.raises(ConfigError):
        JsonlFileStore(root, repair="yes")  # type: ignore[arg-type]  # the bad input under test


@pytest.mark.clause("J3")
def test_reopen_after_close_sees_everything_and_closed_store_refuses(
    root: Path,
) -> None:
    """Everything acknowledged is on disk; a closed handle raises ContractError."""
    with JsonlFileStore(root) as store, FileTranscriptStore(root) as blobs:
        store.append("run", _entry(0))
        store.put_meta({"runId": "run", "status": "ok"})
        blobs.put("run/t0", b"transcript")
    with pytest.raises(ContractError):
        store.load("run")
    with pytest.raises(ContractError):
        blobs.get("run/t0")
    reopened = JsonlFileStore(root)
    assert reopened.load("run") == [_entry(0)]
    assert reopened.get_meta("run") == {"runId": "run", "status": "ok"}
    assert FileTranscriptStore(root).get("run/t0") == b"transcript"


def test_a_copied_run_directory_loads_identically_elsewhere(tmp_path: Path) -> None:
    """A run moves between machines by copying its directory."""
    source_root = tmp_path / "machine-a"
    store = JsonlFileStore(source_root)
    blobs = FileTranscriptStore(source_root)
    for seq in range(5):
        store.append("run", _entry(seq, value={"text": "ß" * seq}))
    store.put_meta({"runId": "run", "status": "suspended", "segments": 2})
    blobs.put("run/ckpt/3", b"\x00\x01binary")
    blobs.put("run/t1", b"transcript")
    blobs.put("run", b"source")
    target_root = tmp_path / "machine-b"
    target_root.mkdir()
    shutil.copytree(source_root / "run", target_root / "run")
    target = JsonlFileStore(target_root)
    target_blobs = FileTranscriptStore(target_root)
    assert target.load("run") == store.load("run")
    assert target.list_runs() == store.list_runs()
    assert target.get_meta("run") == store.get_meta("run")
    assert target_blobs.list_refs("run") == blobs.list_refs("run")
    for ref in [*blobs.list_refs("run"), "run"]:
        assert target_blobs.get(ref) == blobs.get(ref)
    target.append("run", _entry(5))
    assert len(target.load("run")) == 6


def test_file_url_opens_both_stores_through_open_store(root: Path) -> None:
    """file:///dir opens a JsonlFileStore and a FileTranscriptStore on one root."""
    with open_store(f"file://{root}") as opened:
        assert isinstance(opened.journal, JsonlFileStore)
        assert isinstance(opened.transcripts, FileTranscriptStore)
        opened.journal.append("run", _entry(0))
        opened.transcripts.put("run/t0", b"x")
    with open_store(f"file://{root}?repair=false") as opened:
        assert isinstance(opened.journal, JsonlFileStore)
        assert opened.journal.repair is False
        assert opened.journal.load("run") == [_entry(0)]
        assert opened.transcripts.get("run/t0") == b"x"
    with pytest.raises(ConfigError):
        open_store(f"file://{root}?ttl_ms=5")
