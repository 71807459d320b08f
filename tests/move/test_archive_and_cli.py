"""The archive (V9), the commands' rows, exit codes and refusals (V5), the tombstone's format (V3, V4)."""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import apsw
import psycopg
import pytest

from rulvar_store import open_store
from rulvar_store.backend import NEVER_EXPIRES_MS
from rulvar_store.errors import (
    ArchiveError,
    CopyConflictError,
    LeaseHeldError,
    RunMovedError,
)
from rulvar_store.ops import ARCHIVE_VERSION, export_runs, import_archive, verify_run
from tests.move._places import Place, seed


def _rulvar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulvar_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _exported(
    places: Callable[[str], Place], tmp_path: Path, name: str = "runs.jsonl"
) -> tuple[Place, Path]:
    src = places("sqlite")
    for run_id in ("run-a", "run-b"):
        seed(src.pair, run_id)
    path = tmp_path / name
    outcomes = list(
        export_runs(src.pair, ["run-a", "run-b"], path, source_name="sqlite:///x")
    )
    assert [o.action for o in outcomes] == ["copied", "copied"]
    return src, path


@pytest.mark.clause("V9")
def test_the_archive_is_versioned_json_lines_with_a_checksum_per_run_V9(
    places: Callable[[str], Place], tmp_path: Path
) -> None:
    """V9: a header with format and version, one record per line, an end line per run."""
    src, path = _exported(places, tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["format"] == "rulvar-runs-archive"
    assert lines[0]["version"] == ARCHIVE_VERSION
    ends = [line for line in lines if "end" in line]
    assert [(e["end"], e["entries"], e["blobs"]) for e in ends] == [
        ("run-a", 7, 3),
        ("run-b", 7, 3),
    ]
    assert all(len(e["sha256"]) == 64 for e in ends)
    assert lines[-1] == {"done": True, "runs": 2}
    dst = places("postgres")
    assert [o.action for o in import_archive(path, dst.pair)] == ["copied", "copied"]
    for run_id in ("run-a", "run-b"):
        assert verify_run(src.pair, dst.pair, run_id) == []
        assert (
            dst.pair.journal.epoch_counter(run_id)
            > src.pair.journal.epoch_counter(run_id) - 1
        )


@pytest.mark.clause("V9")
@pytest.mark.parametrize("damage", ["flipped-byte", "unknown-version", "truncated"])
def test_a_damaged_archive_imports_nothing_V9(
    places: Callable[[str], Place], tmp_path: Path, damage: str
) -> None:
    """V9: a checksum that does not match, an unknown version or a cut file: ArchiveError, nothing written."""
    _, path = _exported(places, tmp_path)
    text = path.read_text()
    if damage == "flipped-byte":
        text = text.replace("\\u00e9 \\u2713 3", "\\u00e9 \\u2713 4", 1).replace(
            "é ✓ 3", "é ✓ 4", 1
        )
    elif damage == "unknown-version":
        text = text.replace(f'"version":{ARCHIVE_VERSION}', '"version":99', 1)
    else:
        text = "\n".join(text.splitlines()[:-3]) + "\n"
    assert text != path.read_text()
    path.write_text(text)
    dst = places("sqlite")
    with pytest.raises(ArchiveError):
        list(import_archive(path, dst.pair))
    assert dst.pair.journal.list_runs() == []
    assert dst.pair.journal.load("run-a") == []
    assert dst.url is not None
    cli = _rulvar("runs", "import", str(path), dst.url)
    assert cli.returncode == 2
    assert "archive" in cli.stderr


@pytest.mark.clause("V9")
def test_a_gzip_archive_round_trips_through_the_commands_V9(
    places: Callable[[str], Place], tmp_path: Path
) -> None:
    """V9: FILE.gz is compressed; export then import by the commands gives equal runs."""
    src, dst = places("sqlite"), places("sqlite")
    seed(src.pair, "run-a")
    assert src.url is not None
    assert dst.url is not None
    path = tmp_path / "runs.jsonl.gz"
    assert (
        _rulvar("runs", "export", src.url, str(path), "--run", "run-a").returncode == 0
    )
    assert gzip.decompress(path.read_bytes()).startswith(
        b'{"format":"rulvar-runs-archive"'
    )
    dry = _rulvar("runs", "import", str(path), dst.url, "--dry-run", "--json")
    assert dry.returncode == 0
    assert json.loads(dry.stdout)["runs"][0]["action"] == "dry-run"
    assert dst.pair.journal.load("run-a") == []
    assert _rulvar("runs", "import", str(path), dst.url).returncode == 0
    assert verify_run(src.pair, dst.pair, "run-a") == []


@pytest.mark.clause("V5")
def test_a_run_under_a_live_lease_is_skipped_unless_waited_for_V5(
    places: Callable[[str], Place],
) -> None:
    """V5: exit 1 and a 'skipped' row naming the holder; with --wait it is copied once free."""
    src, dst = places("sqlite"), places("sqlite")
    seed(src.pair, "run-a")
    assert src.url is not None
    assert dst.url is not None
    with open_store(src.url, ttl_ms=8000) as short:
        short.journal.acquire("run-a", "busy-worker")  # type: ignore[attr-defined]  # SqliteStore
    skipped = _rulvar("runs", "copy", src.url, dst.url, "--run", "run-a", "--json")
    assert skipped.returncode == 1
    row = json.loads(skipped.stdout)["runs"][0]
    assert row["action"] == "skipped"
    assert "busy-worker" in row["detail"]
    assert row["remains"]
    waited = _rulvar(
        "runs",
        "copy",
        src.url,
        dst.url,
        "--run",
        "run-a",
        "--wait",
        "--wait-timeout",
        "20",
    )
    assert waited.returncode == 0, waited.stderr
    assert "run-a copied" in waited.stdout
    assert verify_run(src.pair, dst.pair, "run-a") == []


def test_the_commands_refuse_usage_mistakes_with_exit_2(
    places: Callable[[str], Place], tmp_path: Path
) -> None:
    """No selection, filters without --all, a move from a store without leases: exit 2, one line."""
    src = places("sqlite")
    seed(src.pair, "run-a")
    assert src.url is not None
    dst = f"sqlite:///{tmp_path}/d.db"
    assert _rulvar("runs", "copy", src.url, dst).returncode == 2
    assert _rulvar("runs", "copy", src.url, dst, "--status", "ok").returncode == 2
    files = _rulvar("runs", "move", f"file://{tmp_path}/files", dst, "--all")
    assert files.returncode == 2
    assert "cannot fence" in files.stderr
    missing = _rulvar("runs", "copy", f"sqlite:///{tmp_path}/nope.db", dst, "--all")
    assert missing.returncode == 2
    dry = _rulvar("runs", "copy", src.url, dst, "--all", "--dry-run")
    assert dry.returncode == 0
    assert "would copy 7 entries, 3 blobs" in dry.stdout
    assert not (tmp_path / "d.db").exists()


@pytest.mark.clause("V3")
@pytest.mark.clause("V4")
def test_the_tombstone_is_a_plain_lease_row_naming_the_destination_without_password_V3_V4(
    places: Callable[[str], Place],
) -> None:
    """V3: SQLite's five tables only, one lease row (reserved owner, epoch = counter, expiry 2**63-1)."""
    src, dst = places("sqlite"), places("postgres")
    seed(src.pair, "run-a")
    assert src.url is not None
    assert dst.url is not None
    with_password = dst.url.replace(
        "postgresql://postgres@", "postgresql://postgres:s3cr%40t@"
    )
    moved = _rulvar("runs", "move", src.url, with_password, "--run", "run-a")
    assert moved.returncode == 0, moved.stderr
    assert "s3cr" not in moved.stdout + moved.stderr
    connection = apsw.Connection(src.url.removeprefix("sqlite:///"))
    tables = {
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type='table'"
        )
    }
    assert {t for t in tables if not t.startswith(("sqlite_", "rulvar_py_"))} == {
        "entries",
        "meta",
        "leases",
        "epochs",
        "blobs",
    }
    ((owner, epoch, expires_at),) = connection.execute(
        "SELECT owner, epoch, expires_at FROM leases WHERE run_id = 'run-a'"
    )
    ((counter,),) = connection.execute(
        "SELECT epoch FROM epochs WHERE run_id = 'run-a'"
    )
    connection.close()
    assert owner.startswith("rulvar-moved:postgresql://postgres:***@")
    assert "s3cr" not in owner
    assert (epoch, expires_at) == (counter, NEVER_EXPIRES_MS)
    with pytest.raises(RunMovedError) as refused:
        src.pair.journal.acquire("run-a", "someone")
    error = refused.value
    assert isinstance(error, LeaseHeldError)
    assert not error.retryable
    assert error.code == "run_moved"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.destination, copy.run_id, copy.epoch) == (
        error.destination,
        "run-a",
        epoch,
    )
    with psycopg.connect(dst.url.split("?")[0], autocommit=True) as conn:
        schema = dst.url.split("schema=")[1]
        (dst_counter,) = conn.execute(
            f'SELECT epoch FROM "{schema}".rulvar_epochs WHERE run_id = %s', ("run-a",)
        ).fetchone() or (0,)
    assert dst_counter > epoch


@pytest.mark.clause("V4")
def test_a_postgres_tombstone_refuses_acquire_typed_V4(
    places: Callable[[str], Place],
) -> None:
    """V4: the PostgreSQL store's acquire says where the run went, too."""
    src, dst = places("postgres"), places("sqlite")
    seed(src.pair, "run-a")
    from rulvar_store.ops import copy_run

    assert (
        copy_run(
            src.pair, dst.pair, "run-a", move=True, destination_name="sqlite:///d.db"
        ).action
        == "moved"
    )
    with pytest.raises(RunMovedError, match=r"sqlite:///d\.db"):
        src.pair.journal.acquire("run-a", "someone")


@pytest.mark.clause("V4")
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_async_stores_refuse_a_moved_run_typed_too_V4(
    places: Callable[[str], Place], kind: str
) -> None:
    """V4: an asyncio handle's acquire at the source raises RunMovedError as well."""
    import asyncio

    from rulvar_store import open_store_async
    from rulvar_store.ops import copy_run

    src, dst = places(kind), places("memory")
    seed(src.pair, "run-a")
    assert (
        copy_run(
            src.pair, dst.pair, "run-a", move=True, destination_name="dest://there"
        ).action
        == "moved"
    )
    url = src.url
    assert url is not None

    async def acquire() -> None:
        opened = await open_store_async(url)
        try:
            await opened.journal.acquire("run-a", "async-worker")  # type: ignore[attr-defined]  # leasable
        finally:
            await opened.aclose()

    with pytest.raises(RunMovedError) as refused:
        asyncio.run(acquire())
    assert refused.value.destination == "dest://there"


@pytest.mark.parametrize(
    "error",
    [
        RunMovedError("moved", "r", "rulvar-moved:x", 3, "x"),
        CopyConflictError("differs", "r"),
        ArchiveError("damaged"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_new_errors_pickle_with_their_fields(error: Exception) -> None:
    """Errors cross process boundaries (soak, kill points): every field survives pickling."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert vars(copy) == vars(error)
    assert copy.args == error.args


@pytest.mark.clause("V5")
def test_a_named_run_the_source_lacks_is_reported_not_created_V5(
    places: Callable[[str], Place],
) -> None:
    """A mistyped --run is a row saying so and exit 1; nothing appears at either end."""
    src, dst = places("sqlite"), places("sqlite")
    seed(src.pair, "run-a")
    assert src.url is not None
    assert dst.url is not None
    copied = _rulvar(
        "runs", "copy", src.url, dst.url, "--run", "run-a", "--run", "nope", "--json"
    )
    assert copied.returncode == 1
    rows = {row["runId"]: row for row in json.loads(copied.stdout)["runs"]}
    assert rows["run-a"]["action"] == "copied"
    assert rows["nope"]["action"] == "skipped"
    assert "no such run" in rows["nope"]["detail"]
    assert (
        src.pair.journal.peek_lease("nope") is None
    )  # no lease row made at the source
    assert dst.pair.journal.load("nope") == []
