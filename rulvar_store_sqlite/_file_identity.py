"""The database file a store opened, and the check that its path still names it.

A process that removes or replaces the file under an open store (``rm
runs.db``, ``mv other.db runs.db``, a restore from backup) leaves the store
writing to an inode no later opener sees: every write it acknowledges from
then on is lost, and a new opener of the path may even meet the old ``-wal``
(issue 21 item 1). SQLite cannot tell; the path can. ``FileIdentity`` keeps the
(device, inode) the path named right after the store opened it, and ``check``
compares the path's at the start of every write transaction, after ``BEGIN
IMMEDIATE`` took the write lock: one ``stat``, a few microseconds against a
commit's flush (``bench/bench_sqlite.py`` measures it).

A mismatch is a ``ConfigError``: the setup changed under the store, nothing of
the transaction was written, and no retry through this handle can succeed;
open a new store on the path (or restore the file) instead.

The ``-wal`` and ``-shm`` files at the path still belong to the old file, and
SQLite replays any WAL it finds into whatever database now has the path (it
keeps the WAL of a moved file at close, on purpose). The store leaves them
alone: once another opener may share them, touching them (a checkpoint, a
truncation) could destroy that opener's writes. Instead ``refuse_orphan_wal``
stops an opener that finds a WAL beside a missing or empty database file;
a WAL beside a file moved over the path (``mv``) cannot be told from its own,
which is why the SQLite guide (docs/guides/sqlite.md) says to stop every writer before replacing a file.
"""

from __future__ import annotations

import os
from typing import final

from rulvar_store.errors import ConfigError

__all__ = ["FileIdentity", "refuse_orphan_wal"]


@final
class FileIdentity:
    """(device, inode) of the database file as opened; ``None`` path: in memory."""

    __slots__ = ("_identity", "_path")

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._identity = None if path is None else _identity(path)

    def check(self, operation: str) -> None:
        """Return quietly while the path still names the opened file.

        Raises:
            ConfigError: the file was removed, or another file now has its path.
        """
        if self._path is None:
            return
        try:
            now = _identity(self._path)
        except FileNotFoundError:
            now = None
        if now != self._identity:
            what = "was removed" if now is None else "was replaced by another file"
            raise ConfigError(
                f"sqlite {operation}: the database file {self._path} {what} after "
                "this store opened it; nothing was written (a write would go to a "
                "file no other opener sees). Open a new store on the path, or "
                "restore the file"
            )


def _identity(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def refuse_orphan_wal(path: str) -> None:
    """Refuse to open ``path`` when its ``-wal`` outlived the database file.

    A WAL-mode database file always holds its first page before its WAL
    exists (SQLite writes the header in rollback mode while switching to
    WAL), so a missing or empty file beside a non-empty ``-wal`` means the
    file was removed while a store had it open: SQLite would replay the old
    file's pages into the new one.

    Raises:
        ConfigError: such a ``-wal`` is there; nothing was created or changed.
    """
    try:
        wal = os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        size = 0
    if wal > 0 and size == 0:
        raise ConfigError(
            f"sqlite: {path}-wal holds {wal} bytes but the database file {path} is "
            "missing or empty: the file was removed while a store had it open, and "
            "opening it would replay the old file's pages. Restore the file, or move "
            "the -wal and -shm files away to start a new database"
        )
