"""JSONL journal store: one directory per run, single-writer, never fenced (T8, T9).

``<root>/<runId>/journal.jsonl`` holds one compact JSON entry per line and
``<root>/<runId>/meta.json`` the run's meta record (layout in ``_file_io``). An
append is one ``write`` of the line plus its newline, then ``fsync`` of the file
(and of the run directory when the append created the file); it returns only
once the line is durable. Meta is replaced through a temp file, ``fsync`` and
``os.replace``.

A crash mid-append can leave a *torn tail*: a last line without its newline or
with invalid JSON. That append never returned, so no acknowledged entry lives
there. With ``repair=True`` (default) the store truncates the file to its last
complete line the first time ``load`` or ``append`` meets it; with
``repair=False`` the file is never modified: ``load`` returns the complete
entries and ``torn_tails()`` reports what it skipped, and ``append`` refuses
(``CorruptFileError``) rather than glue a line onto a partial one. A bad line
anywhere else is corruption, never a crash residue: ``CorruptFileError`` names
the file and line and nothing is dropped.

A delete is all or nothing across a crash: it first writes and syncs a
``delete~intent`` file in the run directory, then removes meta and journal; a
death midway is finished by the next call that touches the run. Parsing and file
identity live in ``_jsonl_file``.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Final, final

from rulvar_store import _intake
from rulvar_store._failpoints import armed, hit
from rulvar_store._file_io import (
    BLOBS_DIR,
    JOURNAL_FILE,
    META_FILE,
    NOFOLLOW,
    TEMP_MARK,
    GuardedHandle,
    creation_modes,
    ensure_dir,
    fsync_dir,
    os_errors,
    resolve_root,
    run_dir,
    write_all,
    write_atomic,
)
from rulvar_store._file_ops import file_ops
from rulvar_store._fork import ForkGuard
from rulvar_store._incremental import JournalTail, parse_cursor
from rulvar_store._instrument import instrumented
from rulvar_store._json import load_record, unreadable_listing
from rulvar_store._jsonl_file import (
    CachedTail,
    CorruptFileError,
    ParsedJournal,
    TornTail,
    file_stamp,
    parse_journal,
    read_all,
    read_from,
    tail_crc,
)
from rulvar_store._records import (
    JournalEntry,
    Lease,
    RunFilter,
    RunMeta,
    finite_seq,
    meta_matches_filter,
)
from rulvar_store._refs import check_safe_token, is_safe_token
from rulvar_store._telemetry import Observed, TelemetryTarget
from rulvar_store.errors import (
    ConfigError,
    JournalOrderViolation,
    UnreadableRecordError,
)

__all__ = ["CorruptFileError", "JsonlFileStore", "TornTail"]

# Written (and synced) before a delete removes anything: its presence is the
# delete's commit point, so a death midway is finished by the next access instead
# of leaving a journal without its meta.
DELETE_INTENT: Final = f"delete{TEMP_MARK}intent"

if sys.platform == "win32":  # pragma: no cover - no flock; single-writer by contract

    def _flock(fd: int, *, exclusive: bool) -> None:
        """Windows has no flock; the single-writer contract is all there is."""

else:
    import fcntl

    def _flock(fd: int, *, exclusive: bool) -> None:
        """Lock the open file until it is closed.

        Appends hold it exclusively from the tail check through ``fsync``, so
        handles in other threads or processes of this host never see a line in
        flight as a torn tail, and never both pass the J6 check for one seq.
        """
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)


def _safe_run_id(run_id: object, operation: str, argument: str = "run_id") -> str:
    """The intake rule, then the file store's stricter safe-token rule (T9).

    A safe token always satisfies the shared rule, so only the type is checked
    first; every other refusal is an ``UnsafeNameError`` (also the
    ``JournalOrderViolation`` the contract names for unsafe names).
    """
    return check_safe_token(
        _intake.require_str(run_id, operation, argument), "run id", operation, argument
    )


def _file_target(store: JsonlFileStore) -> TelemetryTarget:
    return TelemetryTarget("rulvar.file", str(store.root))


@final
@instrumented(_file_target, role="journal")
class JsonlFileStore(GuardedHandle, Observed):
    """Journal and meta store over one directory per run; safe across threads.

    Not leasable and never fenced: it is single-writer by contract (J8, T8) and
    does not declare ``fenced_writes``, so ``assert_fenced_writes`` refuses it
    (X5). Lease arguments are accepted for SPI compatibility and ignored; they
    protect nothing here. The J6 seq guard still applies: the run's max finite
    seq is cached after the first read and re-derived from the file whenever its
    stat stamp (inode, size, mtime, ctime) shows another handle changed it.
    Within one host, appends from several handles are serialized by ``flock``.

    Run ids must be safe tokens (T9); any other raises ``JournalOrderViolation``
    before anything on disk is touched.

    Args:
        root: the directory holding one subdirectory per run; created on the
            first write.
        repair: truncate torn last lines (default). ``False`` never truncates:
            ``load`` reports torn tails through ``torn_tails()`` and leaves the
            file byte-identical, and ``append`` refuses to write after one.
            Meta writes, clean appends and deletes work in both modes.
        private: create files owner-only (0600) and folders 0700 (default);
            ``False`` leaves modes to the umask (0666/0777 before it).
    """

    # X13: torn-tail repair, metas (and the twin's blobs) replaced by rename, the
    # delete intent. Read through ``has_single_writer_files``.
    single_writer_files: Final = True

    def __init__(
        self, root: str | os.PathLike[str], *, repair: bool = True, private: bool = True
    ) -> None:
        if not isinstance(root, str | os.PathLike):
            raise ConfigError(
                f"JsonlFileStore root must be a path, got {type(root).__name__}"
            )
        if not isinstance(repair, bool):
            raise ConfigError(f"repair must be a bool, got {type(repair).__name__}")
        if not isinstance(private, bool):
            raise ConfigError(f"private must be a bool, got {type(private).__name__}")
        self._modes = creation_modes(private)
        self.root: Final = resolve_root(root)
        self.repair: Final = repair
        self._lock = threading.RLock()
        self._tails: dict[str, CachedTail] = {}
        self._torn: dict[str, TornTail] = {}
        self._closed = False
        self._fork = ForkGuard(repr(self))

    def __repr__(self) -> str:
        return f"JsonlFileStore({str(self.root)!r}, repair={self.repair})"

    def close(self) -> None:
        """Forget cached state; later calls raise ``ContractError``. Idempotent."""
        with self._lock:
            self._closed = True
            self._tails.clear()

    def __enter__(self) -> JsonlFileStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- torn tails ------------------------------------------------------------

    def torn_tails(self) -> list[TornTail]:
        """Return the latest torn tail this store met per run, sorted by run id.

        A repaired tail stays listed as a record of the dropped bytes; an
        unrepaired one (``repair=False``) disappears once a later ``load`` finds
        the journal clean.
        """
        with self._lock:
            return [self._torn[run_id] for run_id in sorted(self._torn)]

    def _note_clean(self, run_id: str) -> None:
        report = self._torn.get(run_id)
        if report is not None and not report.repaired:
            del self._torn[run_id]

    def _settle_tail(self, run_id: str, path: Path, fd: int) -> ParsedJournal:
        """Parse the journal under an exclusive flock; repair or refuse a torn tail.

        Raises:
            CorruptFileError: a bad line before the last, or a torn tail while
                ``repair`` is off.
        """
        parsed = parse_journal(read_all(fd), run_id, path)
        torn = parsed.torn
        if torn is not None:
            if not self.repair:
                self._torn[run_id] = torn
                self._tails.pop(run_id, None)
                raise CorruptFileError(
                    f"journal of run {run_id!r} ends in a torn line at "
                    f"{path}:{torn.line} ({torn.dropped_bytes} bytes); this store "
                    "does not repair (repair=False), so nothing was appended",
                    run_id,
                    str(path),
                    torn.line,
                    True,
                )
            file_ops().ftruncate(fd, torn.offset)
            file_ops().fsync(fd)
            self._torn[run_id] = TornTail(
                torn.run_id,
                torn.path,
                torn.line,
                torn.offset,
                torn.dropped_bytes,
                True,
            )
        else:
            self._note_clean(run_id)
        self._tails[run_id] = CachedTail(file_stamp(fd), parsed.max_seq)
        return parsed

    # -- journal ---------------------------------------------------------------

    def append(
        self, run_id: str, entry: JournalEntry, lease: Lease | None = None
    ) -> None:
        """Append one entry durably; ``lease`` is ignored (single-writer, J8).

        Raises:
            JournalOrderViolation: unsafe run id, or the entry's finite seq is not
                above every stored seq of the run (J6); nothing was written.
            ContractError: ``entry`` is not a dict; ``CorruptFileError`` when the
                journal is corrupt, or torn while ``repair`` is off.
        """
        _safe_run_id(run_id, "append")
        _intake.lease_or_none(lease, "append")
        directory = run_dir(self.root, run_id)
        line = (_intake.entry_text(entry) + "\n").encode(
            "utf-8"
        )  # D2: before any write
        seq = finite_seq(entry)
        path = directory / JOURNAL_FILE
        with self._entered("append"), os_errors(f"append to run {run_id!r}", path):
            self._settle_delete(run_id, directory, "append")
            ensure_dir(directory, self._modes[1])
            flags = os.O_RDWR | os.O_APPEND | NOFOLLOW
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, self._modes[0])
                created = True
            except FileExistsError:
                fd = os.open(path, flags)
                created = False
            try:
                _flock(fd, exclusive=True)
                tail = self._tails.get(run_id)
                if tail is None or tail.stamp != file_stamp(fd):
                    max_seq = self._settle_tail(run_id, path, fd).max_seq
                else:
                    max_seq = tail.max_seq
                if seq is not None and max_seq is not None and seq <= max_seq:
                    raise JournalOrderViolation(
                        f"append to run {run_id!r}: seq {seq} is not above the "
                        f"stored tail {max_seq}",
                        run_id,
                        seq,
                    )
                self._write_line(run_id, fd, line)
                if created:
                    fsync_dir(directory)
                self._tails[run_id] = CachedTail(
                    file_stamp(fd), max_seq if seq is None else seq
                )
            finally:
                os.close(fd)
            hit("append", "after-commit")

    def _write_line(self, run_id: str, fd: int, line: bytes) -> None:
        size = os.fstat(fd).st_size
        try:
            if armed():
                # Only under a failpoint hook: write the line in two parts, so a
                # death between them leaves the torn tail a crash can leave.
                half = len(line) // 2
                write_all(fd, line[:half])
                hit("append", "mid-write")
                write_all(fd, line[half:])
                hit("append", "after-write")
            else:
                write_all(fd, line)
            file_ops().fsync(fd)
        except OSError:
            # Take a partial line back now rather than leave a torn tail behind.
            self._tails.pop(run_id, None)
            with suppress(OSError):
                file_ops().ftruncate(fd, size)
            raise

    def load(self, run_id: str) -> list[JournalEntry]:
        """Return the run's complete entries in append order; ``[]`` if unknown (J5).

        Raises:
            JournalOrderViolation: unsafe run id.
            CorruptFileError: a bad line before the last one.
        """
        path = run_dir(self.root, _safe_run_id(run_id, "load")) / JOURNAL_FILE
        with self._entered("load"), os_errors(f"load of run {run_id!r}", path):
            if self._settle_delete(run_id, path.parent, "load"):
                return []
            try:
                fd = os.open(path, os.O_RDONLY | NOFOLLOW)
            except FileNotFoundError:
                self._tails.pop(run_id, None)
                self._note_clean(run_id)
                return []
            try:
                _flock(fd, exclusive=False)
                stamp = file_stamp(fd)
                parsed = parse_journal(read_all(fd), run_id, path)
            finally:
                os.close(fd)
            if parsed.torn is None:
                self._note_clean(run_id)
                self._tails[run_id] = CachedTail(stamp, parsed.max_seq)
                return parsed.entries
            if not self.repair:
                self._torn[run_id] = parsed.torn
                self._tails.pop(run_id, None)
                return parsed.entries
            return self._repair_and_load(run_id, path)

    def load_since(self, run_id: str, cursor: str | None = None) -> JournalTail:
        """Return the complete entries appended after ``cursor`` (``_incremental``).

        The cursor is the journal file's inode, the byte offset read up to (a
        line boundary) and a CRC of the bytes just before it; a new inode, a
        shorter file or other bytes there mean the run was deleted (and maybe
        recreated) since. Only the new bytes are read. A torn last line is not
        returned and the cursor stays before it; nothing is repaired here.

        Raises:
            JournalOrderViolation: unsafe run id.
            CorruptFileError: a bad line before the last one.
        """
        # Inodes are unsigned 64-bit (overlayfs sets the top bits); the file
        # store compares them in Python only.
        position = parse_cursor(cursor, "file", 3, bound=None)
        path = run_dir(self.root, run_id) / JOURNAL_FILE
        with (
            self._entered("load_since"),
            os_errors(f"load_since of run {run_id!r}", path),
        ):
            try:
                fd = os.open(path, os.O_RDONLY | NOFOLLOW)
            except FileNotFoundError:
                gone = position is not None and position[1] > 0
                return JournalTail([], "file:0:0:0", gone)
            try:
                _flock(fd, exclusive=False)
                inode, start, restarted = os.fstat(fd).st_ino, 0, False
                if position is not None and position[1] > 0:
                    if (
                        position[0] == inode
                        and tail_crc(fd, position[1]) == position[2]
                    ):
                        start = position[1]
                    else:
                        restarted = True
                data = read_from(fd, start)
                end = data.rfind(b"\n") + 1  # complete lines only
                parsed = parse_journal(data[:end], run_id, path)
                if parsed.torn is not None:  # an invalid last line: not yet read
                    end = parsed.torn.offset
                offset = start + end
                crc = tail_crc(fd, offset)
            finally:
                os.close(fd)
        return JournalTail(parsed.entries, f"file:{inode}:{offset}:{crc}", restarted)

    def _repair_and_load(self, run_id: str, path: Path) -> list[JournalEntry]:
        try:
            fd = os.open(path, os.O_RDWR | NOFOLLOW)
        except FileNotFoundError:  # deleted by another handle meanwhile
            self._tails.pop(run_id, None)
            return []
        try:
            _flock(fd, exclusive=True)
            return self._settle_tail(run_id, path, fd).entries
        finally:
            os.close(fd)

    # -- meta --------------------------------------------------------------------

    def put_meta(self, meta: RunMeta, lease: Lease | None = None) -> None:
        """Replace the run's whole meta record atomically; ``lease`` is ignored (M2).

        Raises:
            ContractError: ``meta`` is not a dict with a string ``runId``.
            JournalOrderViolation: the run id is unsafe; nothing was written.
        """
        if isinstance(meta, dict) and isinstance(meta.get("runId"), str):
            # The stricter file rule first.
            _safe_run_id(meta["runId"], "put_meta", "meta['runId']")
        run_id, text = _intake.meta_text(meta)
        _intake.lease_or_none(lease, "put_meta")
        directory = run_dir(self.root, run_id)
        data = (text + "\n").encode("utf-8")  # D2: before any write
        path = directory / META_FILE
        with self._entered("put_meta"), os_errors(f"put_meta of run {run_id!r}", path):
            self._settle_delete(run_id, directory, "put_meta")
            ensure_dir(directory, self._modes[1])
            write_atomic(path, data, "put_meta", self._modes[0])
            hit("put_meta", "after-commit")

    def _read_meta(self, run_id: str, path: Path) -> RunMeta | None:
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = read_all(fd)
        finally:
            os.close(fd)
        try:
            meta = load_record(data.decode("utf-8"))
        except UnreadableRecordError:
            raise  # JSON, but not readable here: typed as on every backend
        except ValueError as exc:
            raise CorruptFileError(
                f"meta of run {run_id!r} at {path} is not valid JSON ({exc})",
                run_id,
                str(path),
            ) from exc
        if not isinstance(meta, dict):
            raise CorruptFileError(
                f"meta of run {run_id!r} at {path} is not a JSON object",
                run_id,
                str(path),
            )
        return meta

    def get_meta(self, run_id: str) -> RunMeta | None:
        """Return the run's meta, or ``None`` when it has none (M5).

        Raises:
            JournalOrderViolation: unsafe run id.
            CorruptFileError: the meta file is not a JSON object.
        """
        path = run_dir(self.root, _safe_run_id(run_id, "get_meta")) / META_FILE
        with self._entered("get_meta"), os_errors(f"get_meta of run {run_id!r}", path):
            if self._settle_delete(run_id, path.parent, "get_meta"):
                return None
            return self._read_meta(run_id, path)

    def run_ids(self) -> list[str]:
        """Run ids with a directory under the root, sorted (names only are read).

        The operator listing's ``RunIdListing`` capability: it reads one meta at
        a time instead of all of them (``list_runs``).
        """
        try:
            with os.scandir(self.root) as scan:
                return sorted(
                    item.name
                    for item in scan
                    if is_safe_token(item.name) and item.is_dir(follow_symlinks=False)
                )
        except FileNotFoundError:
            return []

    def list_runs(self, run_filter: RunFilter | None = None) -> list[RunMeta]:
        """Return matching metas ordered by run id, reading meta files only (M1, M4)."""
        run_filter = _intake.run_filter(run_filter)
        with self._entered("list_runs"), os_errors("list_runs", self.root):
            try:
                with os.scandir(self.root) as scan:
                    names = sorted(
                        item.name
                        for item in scan
                        if is_safe_token(item.name)
                        and item.is_dir(follow_symlinks=False)
                    )
            except FileNotFoundError:
                return []
            metas: list[RunMeta] = []
            unreadable: list[str] = []
            for name in names:
                if self._settle_delete(name, self.root / name, "list_runs"):
                    continue
                try:
                    meta = self._read_meta(name, self.root / name / META_FILE)
                except UnreadableRecordError:
                    unreadable.append(name)  # named below; the others still list
                    continue
                if meta is not None and meta_matches_filter(meta, run_filter):
                    metas.append(meta)
            if unreadable:
                raise unreadable_listing(metas, unreadable)
            return metas

    def delete(self, run_id: str, lease: Lease | None = None) -> None:
        """Remove the run's journal and meta, never its blobs (M6, T5).

        ``lease`` is ignored. All or nothing across a crash: a synced intent file
        is written first, and a delete that died after it is finished by the next
        call that touches the run (or, with ``repair=False``, the run reads as
        deleted and writes to it are refused until a repairing open finishes
        it). A run with no blobs leaves no directory behind; one with blobs keeps
        ``blobs/`` and ``run.blob``. Unknown run: no-op.

        Raises:
            JournalOrderViolation: unsafe run id; nothing was touched.
        """
        _intake.lease_or_none(lease, "delete")
        directory = run_dir(self.root, _safe_run_id(run_id, "delete"))
        with self._entered("delete"), os_errors(f"delete of run {run_id!r}", directory):
            self._tails.pop(run_id, None)
            self._torn.pop(run_id, None)
            present = [
                name
                for name in (META_FILE, JOURNAL_FILE, DELETE_INTENT)
                if (directory / name).exists()
            ]
            if not present:
                hit("delete", "after-commit")
                return
            if DELETE_INTENT not in present:
                fd = os.open(
                    directory / DELETE_INTENT,
                    os.O_WRONLY | os.O_CREAT | NOFOLLOW,
                    self._modes[0],
                )
                try:
                    file_ops().fsync(fd)
                finally:
                    os.close(fd)
                fsync_dir(directory)
            self._finish_delete(directory)
            hit("delete", "after-commit")

    def _settle_delete(self, run_id: str, directory: Path, operation: str) -> bool:
        """Finish a delete a crash interrupted; True when the run counts as deleted.

        With ``repair=False`` nothing is modified: reads see the run deleted and
        writes are refused, so no write can land in a run about to vanish.
        """
        if not (directory / DELETE_INTENT).exists():
            return False
        if self.repair:
            self._tails.pop(run_id, None)
            self._finish_delete(directory)
            return True
        if operation in ("append", "put_meta"):
            raise CorruptFileError(
                f"{operation} of run {run_id!r}: a delete of this run was interrupted "
                "and is not finished while repair is off",
                run_id,
                str(directory / DELETE_INTENT),
            )
        return True

    def _finish_delete(self, directory: Path) -> None:
        """Remove meta, journal and leftovers, then the intent and empty folders."""
        for name in (META_FILE, JOURNAL_FILE):
            with suppress(FileNotFoundError, NotADirectoryError):
                os.unlink(directory / name)
            if name == META_FILE:
                hit("delete", "mid-write")
        with os.scandir(directory) as scan:
            leftovers = [
                item.path
                for item in scan
                if item.name.startswith(META_FILE + TEMP_MARK)
            ]
        for leftover in leftovers:  # temp files of a put_meta that crashed
            with suppress(FileNotFoundError):
                os.unlink(leftover)
        fsync_dir(directory)
        with suppress(FileNotFoundError):
            os.unlink(directory / DELETE_INTENT)
        fsync_dir(directory)
        with suppress(OSError):  # kept when blobs live there (T5)
            os.rmdir(directory / BLOBS_DIR)
        try:
            os.rmdir(directory)
        except OSError:
            return
        fsync_dir(self.root)
