"""JSONL journal files as bytes: parsing, torn tails, corruption, file identity.

What ``JsonlFileStore`` needs to read a journal file without trusting it: a torn
last line (a crash mid-append) is told apart from corruption anywhere else, and a
file's identity (inode, size, mtime) and a CRC of its tail let cached tails and
incremental-read cursors notice that the file changed under them.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rulvar_store._json import load_record
from rulvar_store._records import JournalEntry, finite_seq
from rulvar_store.errors import ContractError

__all__ = [
    "CURSOR_CRC_BYTES",
    "CachedTail",
    "CorruptFileError",
    "FileStamp",
    "ParsedJournal",
    "TornTail",
    "file_stamp",
    "parse_journal",
    "read_all",
    "read_from",
    "tail_crc",
]


class CorruptFileError(ContractError):
    """A store file holds bytes the store did not write as they are; nothing was dropped.

    ``line`` is the 1-based journal line (``None`` for a meta file). ``torn`` is
    true for a torn last line that a ``repair=False`` store refused to append
    after; reopen with ``repair=True`` to truncate it. Retrying cannot help: an
    operator must restore or repair the file.
    """

    code = "corrupt_file"

    def __init__(
        self,
        message: str,
        run_id: str | None = None,
        path: str | None = None,
        line: int | None = None,
        torn: bool = False,
    ) -> None:
        super().__init__(message, run_id, path, line, torn)
        self.run_id = run_id
        self.path = path
        self.line = line
        self.torn = torn

    @property
    def data(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "path": self.path,
            "line": self.line,
            "torn": self.torn,
        }


@dataclass(frozen=True, slots=True)
class TornTail:
    """A last journal line a crash left incomplete, as the store found it.

    Attributes:
        run_id: the run whose journal it ends.
        path: the journal file.
        line: 1-based number of the torn line.
        offset: bytes of complete lines before it (the file's length once repaired).
        dropped_bytes: length of the torn line in bytes.
        repaired: whether this store truncated it away.
    """

    run_id: str
    path: str
    line: int
    offset: int
    dropped_bytes: int
    repaired: bool


@dataclass(frozen=True, slots=True)
class ParsedJournal:
    entries: list[JournalEntry]
    max_seq: int | float | None
    torn: TornTail | None  # ``repaired`` still False: the caller decides


# (device, inode, size, mtime, ctime): any write, truncate or replace by any
# handle changes at least one of them.
FileStamp = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class CachedTail:
    stamp: FileStamp
    max_seq: int | float | None


def file_stamp(fd: int) -> FileStamp:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_from(fd: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


# How many bytes before a cursor's offset its CRC covers: enough to tell a
# recreated journal from the one read, O(1) to check.
CURSOR_CRC_BYTES: Final = 64


def tail_crc(fd: int, offset: int) -> int:
    """CRC-32 of the bytes just before ``offset`` (0 at offset 0 or past the end)."""
    if offset == 0:
        return 0
    size = min(offset, CURSOR_CRC_BYTES)
    data = os.pread(fd, size, offset - size)
    return zlib.crc32(data) if len(data) == size else -1


def parse_journal(data: bytes, run_id: str, path: Path) -> ParsedJournal:
    """Parse complete lines; report a torn last line; raise on any other bad line."""
    entries: list[JournalEntry] = []
    max_seq: int | float | None = None
    start = 0
    line = 0
    while start < len(data):
        line += 1
        end = data.find(b"\n", start)
        last = end == -1 or end + 1 == len(data)
        raw = data[start:] if end == -1 else data[start:end]
        entry: object = None
        problem = "has no newline" if end == -1 else ""
        if not problem:
            try:
                entry = load_record(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                problem = f"is not UTF-8 (byte {exc.start})"
            except json.JSONDecodeError as exc:
                problem = f"is not valid JSON ({exc.msg}: byte {exc.pos})"
        if problem and last:
            torn = TornTail(run_id, str(path), line, start, len(data) - start, False)
            return ParsedJournal(entries, max_seq, torn)
        if problem or not isinstance(entry, dict):
            raise CorruptFileError(
                f"journal of run {run_id!r} is corrupt at {path}:{line}: the line "
                f"{problem or 'is not a JSON object'}; no entry was dropped, "
                "restore or repair the file",
                run_id,
                str(path),
                line,
            )
        seq = finite_seq(entry)
        if seq is not None and (max_seq is None or seq > max_seq):
            max_seq = seq
        entries.append(entry)
        start = end + 1
    return ParsedJournal(entries, max_seq, None)
