"""A database file removed or replaced under an open store: writes refuse, typed (Q18).

``rm runs.db`` (its ``-wal`` and ``-shm`` stay) or ``mv other.db runs.db``
under an open ``SqliteStore`` left it writing to an inode no later opener
sees: its next appends were acknowledged and lost (issue 21 item 1). Every
write transaction now checks, after ``BEGIN IMMEDIATE``, that the path still
names the file the store opened; otherwise the write raises a non-retryable
``ConfigError`` and nothing is written anywhere.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rulvar_store import Lease
from rulvar_store.errors import ConfigError
from rulvar_store_sqlite import AsyncSqliteStore, SqliteStore

Write = Callable[[SqliteStore, Lease], Any]

WRITES: dict[str, Write] = {
    "append": lambda s, lease: s.append("run", {"seq": 5}, lease),
    "put_meta": lambda s, lease: s.put_meta({"runId": "run", "status": "x"}, lease),
    "acquire": lambda s, lease: s.acquire("other", "w"),
    "renew": lambda s, lease: s.renew(lease),
    "release": lambda s, lease: s.release(lease),
    "delete": lambda s, lease: s.delete("run", lease),
    "blob put": lambda s, lease: s.transcripts().put("run/b", b"x", lease),
    "blob delete": lambda s, lease: s.transcripts().delete("run/a", lease),
}


def _seeded(path: Path, group_commit: bool) -> tuple[SqliteStore, Lease]:
    store = SqliteStore(str(path), group_commit=group_commit)
    lease = store.acquire("run", "w")
    for seq in range(5):
        store.append("run", {"seq": seq}, lease)
    store.transcripts().put("run/a", b"a", lease)
    return store, lease


def _removed(path: Path) -> None:
    os.unlink(path)  # the -wal and -shm stay, as after `rm runs.db`
    assert Path(f"{path}-wal").exists()


def _replaced(path: Path) -> None:
    other = path.with_name("other.db")
    with SqliteStore(str(other)) as foreign:
        foreign.append("run", {"seq": 100})
    os.replace(other, path)  # `mv other.db runs.db`


@pytest.mark.clause("Q18")
@pytest.mark.parametrize("group_commit", [True, False])
@pytest.mark.parametrize("change", [_removed, _replaced], ids=["rm", "mv"])
@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_refuses_once_the_path_names_another_file(
    tmp_path: Path, write: str, change: Callable[[Path], None], group_commit: bool
) -> None:
    path = tmp_path / "runs.db"
    wal = Path(f"{path}-wal")
    store, lease = _seeded(path, group_commit)
    try:
        change(path)
        before = wal.read_bytes()
        with pytest.raises(ConfigError, match="nothing was written") as caught:
            WRITES[write](store, lease)
        assert not caught.value.retryable
        assert not store._conn.in_transaction  # rolled back, no lock kept
        assert wal.read_bytes() == before  # not one frame written
    finally:
        store.close()


@pytest.mark.clause("Q18")
def test_the_async_store_refuses_too(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"

    async def scenario() -> None:
        store = await AsyncSqliteStore.open(str(path))
        try:
            await store.append("run", {"seq": 0})
            _removed(path)
            with pytest.raises(ConfigError, match="was removed"):
                await store.append("run", {"seq": 1})
        finally:
            await store.aclose()

    asyncio.run(scenario())


_SECOND_WORKER = textwrap.dedent(
    """
    import sys
    from rulvar_store.errors import ConfigError
    from rulvar_store_sqlite import SqliteStore
    try:
        store = SqliteStore(sys.argv[1])
    except ConfigError as exc:
        print("refused:", exc)
        raise SystemExit(0)
    with store:
        store.append("run", {"seq": 100})
        print(store.load("run"))
    """
)


def _second_worker(path: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", _SECOND_WORKER, str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.mark.clause("Q18")
def test_the_reported_two_worker_scenario_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    """Worker A appends 0-4, the file is removed, worker B (a process) opens the path.

    Before the fix B replayed A's old WAL into its new file, and A's next
    append was acknowledged, then gone. Now B refuses to open beside the old
    file's WAL, and A's append is refused: nothing is acknowledged that the
    path's file does not hold. Once the operator moves the old WAL away, B
    starts a clean file.
    """
    path = tmp_path / "runs.db"
    first = SqliteStore(str(path))
    try:
        for seq in range(5):
            first.append("run", {"seq": seq})
        os.unlink(path)
        assert _second_worker(path).startswith("refused:")
        assert not path.exists()  # the refused opener created nothing
        with pytest.raises(ConfigError, match="was removed"):
            first.append("run", {"seq": 6})
    finally:
        first.close()
    assert _second_worker(path).startswith("refused:")  # the WAL is still there
    for suffix in ("-wal", "-shm"):
        os.replace(f"{path}{suffix}", tmp_path / f"old{suffix}")
    assert _second_worker(path) == "[{'seq': 100}]"
    with SqliteStore(str(path)) as reader:
        assert reader.load("run") == [{"seq": 100}]
