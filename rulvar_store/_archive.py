"""The portable run archive: one streaming, versioned file of runs (V9, V10).

JSON Lines, UTF-8, gzip-compressed when the file name ends in ``.gz``. Every line
is one JSON object; no line holds more than one record, so a reader or writer
holds one record at a time::

    {"format": "rulvar-runs-archive", "version": 1, "created": "...", "source": "..."}
    {"run": "<runId>", "epoch": 7}             one run begins; its epoch counter
    {"m": "<meta JSON text>"}                   the meta (absent if the run has none)
    {"e": "<entry JSON text>"}                  each entry, in load order, as stored
    {"b": "<ref>", "data": "<base64>"}          each blob
    {"end": "<runId>", "entries": 3, "blobs": 1, "sha256": "<hex>"}
    ...                                         further runs
    {"done": true, "runs": 12}

``sha256`` covers the bytes of the run's lines from its ``run`` line up to (not
including) its ``end`` line. An import checks every run's checksum and the
``done`` line in a first pass and writes nothing if any is wrong; the second
pass writes through ``RunWriter``, the destination side of a copy, so an import
killed part way resumes like a copy. An export writes ``FILE.partial`` and
renames it when complete. A reader refuses a ``version`` it does not know.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import gzip
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

from rulvar_store._json import load_record
from rulvar_store._move_base import (
    CopyOutcome,
    StorePair,
    _acquire,
    _destination_ready,
    _Keeper,
    _raise_epoch_by_leases,
    _refusal,
    _release_quietly,
    mover_owner,
)
from rulvar_store._move_io import _NO_SUCH_RUN, RunReader, RunWriter, _absent
from rulvar_store._records import Lease
from rulvar_store._retention import is_leasable
from rulvar_store.errors import (
    ArchiveError,
    CopyConflictError,
    LeaseHeldError,
)

__all__ = [
    "ARCHIVE_FORMAT",
    "ARCHIVE_VERSION",
    "ArchiveError",
    "ArchiveRun",
    "export_runs",
    "import_archive",
    "scan_archive",
]

ARCHIVE_FORMAT: Final = "rulvar-runs-archive"
ARCHIVE_VERSION: Final = 1


def _open_read(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")  # returned to the caller's with


def _open_write(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz.partial") or path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "wb", compresslevel=6))
    return open(path, "wb")  # returned to the caller's with


def _line(record: dict[str, Any]) -> bytes:
    return (
        json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    )


# -- export ----------------------------------------------------------------------


def _write_run(
    out: IO[bytes], reader: RunReader, epoch: int, keeper: _Keeper
) -> tuple[int, int, int]:
    digest = hashlib.sha256()
    size = entries = blobs = 0

    def emit(record: dict[str, Any]) -> None:
        nonlocal size
        line = _line(record)
        digest.update(line)
        out.write(line)
        size += len(line)

    emit({"run": reader.run_id, "epoch": epoch})
    meta = reader.meta_text()
    if meta is not None:
        emit({"m": meta})
    for text in reader.entry_texts():
        emit({"e": text})
        entries += 1
        if entries % 2000 == 0:
            keeper.tick()
    for ref, data in reader.blobs():
        emit({"b": ref, "data": base64.b64encode(data).decode("ascii")})
        blobs += 1
    out.write(
        _line(
            {
                "end": reader.run_id,
                "entries": entries,
                "blobs": blobs,
                "sha256": digest.hexdigest(),
            }
        )
    )
    return entries, blobs, size


def export_runs(
    source: StorePair,
    run_ids: Iterable[str],
    path: str | os.PathLike[str],
    *,
    source_name: str = "",
    wait_s: float = 0.0,
) -> Iterator[CopyOutcome]:
    """Write ``run_ids`` of ``source`` to the archive at ``path``, yielding each outcome.

    Each run is read under a brief mover's lease (a frozen, consistent run and
    its epoch counter); a run under another live lease is skipped. The file
    appears only once complete (``path`` + ``.partial`` until then).
    """
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    owner = mover_owner()
    journal: Any = source.journal
    count = 0
    with _open_write(partial) as out:
        created = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        out.write(
            _line(
                {
                    "format": ARCHIVE_FORMAT,
                    "version": ARCHIVE_VERSION,
                    "created": created,
                    "source": source_name,
                }
            )
        )
        for run_id in run_ids:
            keeper = _Keeper()
            lease: Lease | None = None
            reader = RunReader(source, run_id)
            if _absent(reader):
                yield CopyOutcome(run_id, "skipped", detail=_NO_SUCH_RUN)
                continue
            if is_leasable(journal):
                got = _acquire(journal, run_id, owner, wait_s)
                if isinstance(got, LeaseHeldError):
                    yield CopyOutcome(run_id, "skipped", detail=_refusal("source", got))
                    continue
                lease = got
                keeper.hold(journal, got)
            try:
                epoch = max(lease.epoch if lease else 0, reader.epoch())
                entries, blobs, size = _write_run(out, reader, epoch, keeper)
            finally:
                _release_quietly(journal, lease)
            count += 1
            yield CopyOutcome(
                run_id,
                "copied",
                entries,
                blobs,
                size,
                epoch or None,
                f"{entries} entries, {blobs} blobs",
            )
        out.write(_line({"done": True, "runs": count}))
    os.replace(partial, target)


# -- import ----------------------------------------------------------------------


class ArchiveRun:
    """One run's records as the second pass reads them, in file order."""

    def __init__(self, run_id: str, epoch: int, lines: _Lines) -> None:
        self.run_id = run_id
        self.epoch = epoch
        self._lines = lines
        self.meta: str | None = None

    def entry_texts(self) -> Iterator[str]:
        while True:
            record = self._lines.peek()
            if "e" not in record:
                return
            self._lines.take()
            yield record["e"]

    def meta_text(self) -> str | None:
        record = self._lines.peek()
        if "m" in record:
            self._lines.take()
            self.meta = record["m"]
        return self.meta

    def blobs(self) -> Iterator[tuple[str, bytes]]:
        while True:
            record = self._lines.peek()
            if "b" not in record:
                return
            self._lines.take()
            yield record["b"], base64.b64decode(record["data"], validate=True)

    def finish(self) -> None:
        record = self._lines.take()
        if record.get("end") != self.run_id:
            raise ArchiveError(f"run {self.run_id!r} does not end where its records do")


class _Lines:
    """The archive's JSON lines with one line of look-ahead."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._next: dict[str, Any] | None = None
        self.number = 0

    def _read(self) -> tuple[bytes, dict[str, Any]]:
        raw = self._stream.readline()
        self.number += 1
        if not raw:
            raise ArchiveError(f"the archive ends early, at line {self.number}")
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ArchiveError(f"line {self.number} is not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise ArchiveError(f"line {self.number} is not a JSON object")
        return raw, record

    def raw(self) -> tuple[bytes, dict[str, Any]]:
        assert self._next is None
        return self._read()

    def peek(self) -> dict[str, Any]:
        if self._next is None:
            self._next = self._read()[1]
        return self._next

    def take(self) -> dict[str, Any]:
        record = self.peek()
        self._next = None
        return record


def _header(lines: _Lines) -> dict[str, Any]:
    _, header = lines.raw()
    if header.get("format") != ARCHIVE_FORMAT:
        raise ArchiveError("not a rulvar runs archive (no format line)")
    if header.get("version") != ARCHIVE_VERSION:
        raise ArchiveError(
            f"archive version {header.get('version')!r} is not one this reader "
            f"knows ({ARCHIVE_VERSION}); upgrade rulvar"
        )
    return header


def _checked_record(record: dict[str, Any], number: int) -> None:
    """Refuse what no store could hold: records that are not JSON objects, bad base64."""
    try:
        if "e" in record or "m" in record:
            text = record.get("e", record.get("m"))
            if not isinstance(text, str) or not isinstance(load_record(text), dict):
                raise ArchiveError(f"line {number}: a record that is not a JSON object")
        elif "b" in record:
            if not isinstance(record["b"], str) or not isinstance(
                record.get("data"), str
            ):
                raise ArchiveError(f"line {number}: a blob without ref or data")
            base64.b64decode(record["data"], validate=True)
        else:
            raise ArchiveError(f"line {number}: an unknown record {sorted(record)[:3]}")
    except (ValueError, binascii.Error) as exc:
        raise ArchiveError(f"line {number}: unreadable ({exc})") from None


def scan_archive(path: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    """Check the whole archive (format, version, every checksum, the end line).

    Returns (run id, entries, blobs) per run. Holds one line at a time.

    Raises:
        ArchiveError: anything wrong; the message names the line or the run.
    """
    runs: list[tuple[str, int, int]] = []
    with _open_read(Path(path)) as stream:
        lines = _Lines(stream)
        _header(lines)
        while True:
            raw, record = lines.raw()
            if record.get("done") is True:
                if record.get("runs") != len(runs):
                    raise ArchiveError("the end line counts another number of runs")
                if stream.readline():
                    raise ArchiveError("lines follow the end line")
                return runs
            run_id = record.get("run")
            epoch = record.get("epoch")
            if not isinstance(run_id, str) or not isinstance(epoch, int):
                raise ArchiveError(f"line {lines.number}: expected a run line")
            digest = hashlib.sha256(raw)
            while True:
                raw, record = lines.raw()
                if "end" in record:
                    break
                _checked_record(record, lines.number)
                digest.update(raw)
            if (
                record.get("end") != run_id
                or record.get("sha256") != digest.hexdigest()
            ):
                raise ArchiveError(
                    f"run {run_id!r}: checksum mismatch (the archive is damaged)"
                )
            runs.append(
                (run_id, int(record.get("entries", 0)), int(record.get("blobs", 0)))
            )


def import_archive(
    path: str | os.PathLike[str],
    destination: StorePair,
    *,
    wait_s: float = 0.0,
) -> Iterator[CopyOutcome]:
    """Write every run of the archive into ``destination``, yielding each outcome.

    The whole file is checked first (``scan_archive``); then each run goes
    through the destination side of a copy (``RunWriter``) under a mover's
    lease, so a re-run after a kill finishes without duplicates. The counter is
    raised one past the archived epoch.

    Raises:
        ArchiveError: the archive is damaged or of an unknown version; nothing written.
    """
    scan_archive(path)
    owner = mover_owner()
    journal: Any = destination.journal
    with _open_read(Path(path)) as stream:
        lines = _Lines(stream)
        _header(lines)
        while True:
            record = lines.take()
            if record.get("done") is True:
                return
            run = ArchiveRun(record["run"], record["epoch"], lines)
            yield _import_run(run, destination, journal, owner, wait_s)


def _skip(run: ArchiveRun) -> None:
    """Read past a run not imported: the archive is one stream, read in order."""
    run.meta_text()
    for _ in run.entry_texts():
        pass
    for _ in run.blobs():
        pass
    run.finish()


def _import_run(
    run: ArchiveRun, destination: StorePair, journal: Any, owner: str, wait_s: float
) -> CopyOutcome:
    keeper = _Keeper()
    got = _destination_ready(journal, run.run_id, owner, wait_s, keeper)
    if isinstance(got, LeaseHeldError):
        _skip(run)
        return CopyOutcome(run.run_id, "skipped", detail=_refusal("destination", got))
    lease = got
    writer = RunWriter(destination, run.run_id, lease, keeper)
    target = run.epoch + 1 if run.epoch else 0
    try:
        meta = run.meta_text()
        entries, _, blobs = writer.journal_and_meta(
            meta, run.entry_texts(), target, run.blobs()
        )
        run.finish()
    except (CopyConflictError, LeaseHeldError) as exc:
        _release_quietly(journal, lease)
        lease = None
        _skip(run)
        return CopyOutcome(run.run_id, "failed", detail=str(exc))
    finally:
        _release_quietly(journal, lease)
    epoch: int | None = None
    if is_leasable(journal) and target:
        epoch = (
            target
            if writer.rows
            else _raise_epoch_by_leases(journal, run.run_id, target, owner)
        )
    return CopyOutcome(
        run.run_id,
        "copied",
        entries,
        blobs,
        writer.written_bytes,
        epoch,
        f"{entries} entries, {blobs} blobs",
    )
