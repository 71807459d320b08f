"""What the SQLite and the file store power-loss runs share: writers, then the cut.

Both runs boot a store from a disk image, let threads on two handles append to
their runs until the power goes, and keep a book per run of what each writer
was told, to check the next boot against. ``PowerStorm`` holds that shared
machinery; the subclasses keep what differs (how a disk is booted and read,
and which promise each synchronous level makes).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Generic, TypeVar

from rulvar_store import OpenedStore
from rulvar_store.errors import RulvarError

__all__ = ["CutReport", "PowerStorm", "SeqBook", "close_after_cut"]

_JOIN_TIMEOUT_S: Final = 60.0
_MAX_VIOLATIONS: Final = 20


@dataclass
class CutReport:
    """The figures every power-loss run counts, and what its checks found."""

    cuts: int = 0
    acknowledged: int = 0
    metas_acknowledged: int = 0
    in_flight_landed: int = 0
    typed_errors: int = 0
    violations: list[str] = field(default_factory=list)

    def violate(self, detail: str) -> None:
        # The first few say what broke; a run that breaks every cut adds nothing.
        if len(self.violations) < _MAX_VIOLATIONS:
            self.violations.append(f"cut {self.cuts}: {detail}")


@dataclass
class SeqBook:
    """What one run's writer was told about its appends, and what survived so far."""

    survivors: list[object] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    in_flight: int | None = None

    def told(self) -> list[object]:
        """The acknowledged seqs, then the one in flight (it may have landed)."""
        if self.in_flight is None:
            return list(self.acked)
        return [*self.acked, self.in_flight]


ReportT = TypeVar("ReportT", bound=CutReport)
BookT = TypeVar("BookT", bound=SeqBook)


class PowerStorm(Generic[ReportT, BookT]):
    """Writer threads, their books and report, and the boot folders of one machine.

    ``is_dead`` is read after every answer: an answer that came after the cut
    has an unknown outcome, so the writer stops without counting it.
    """

    def __init__(
        self,
        workdir: Path,
        report: ReportT,
        books: dict[str, BookT],
        is_dead: Callable[[], bool],
    ) -> None:
        self.workdir = workdir
        self.report = report
        self.books = books
        self.is_dead = is_dead
        self.lock = threading.Lock()
        self.folder: Path | None = None

    def retire_previous_boot(self, folder: Path) -> None:
        """``folder`` holds the new boot's image: the previous one goes."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = folder

    def appended(self, book: BookT, seq: int, append: Callable[[], None]) -> bool:
        """Append ``seq`` through ``append``; False when the answer came after the cut."""
        book.in_flight = seq
        append()
        if self.is_dead():
            return False
        book.acked.append(seq)
        book.in_flight = None
        with self.lock:
            self.report.acknowledged += 1
        return True

    @contextmanager
    def writer_calls(self, run_id: str) -> Iterator[None]:
        """A typed failure is the cut's due; before it, or untyped, it is a violation."""
        try:
            yield
        except RulvarError as exc:
            with self.lock:
                self.report.typed_errors += 1
            if not self.is_dead():
                self.report.violate(f"{run_id}: a call failed before the cut: {exc!r}")
        except Exception as exc:
            with self.lock:
                self.report.violate(
                    f"{run_id}: a call failed with the untyped {type(exc).__name__}: {exc}"
                )

    def run_writers(self, writers: Sequence[Callable[[], None]]) -> None:
        """Each writer on its own thread until it is done or the power goes."""
        threads = [threading.Thread(target=writer, daemon=True) for writer in writers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(_JOIN_TIMEOUT_S)
            if thread.is_alive():
                self.report.violate("a writer hung after the power cut")


def close_after_cut(handles: Sequence[OpenedStore]) -> None:
    """Close every handle on a dead disk: closing may fail (typed or not), not hang."""
    for opened in handles:
        with suppress(Exception):
            opened.close()
