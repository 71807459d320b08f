"""``file_machinery_conformance(certification)``: the file stores' single-writer machinery.

A store that keeps its journal, metas and blobs in plain files has no
transaction to fall back on: what keeps a crash from showing is its own
machinery (CONTRACT X13). A journal that declares ``single_writer_files``
(``has_single_writer_files``) gets three checks, each with a spawned child that
writes and dies by SIGKILL; any other store gets them as not run, with the
reason.

- ``files-torn-tail-repaired``: a child dies halfway through an append's line
  (the ``mid-write`` failpoint). The next open loads every complete entry and
  none of the torn one, and an append after it lands whole and is loaded back:
  a store that does not cut the torn bytes glues the next line onto them.
- ``files-replace-by-rename``: a child overwrites a 256 KiB meta and a 2 MiB
  blob with alternating versions while this process reads both in a loop,
  until a timer SIGKILLs the child, most likely mid-write. Every read, and the
  read of a fresh handle after the death, is one whole version: a store that
  writes in place shows a truncated or half-new file.
- ``files-delete-intent``: a child dies in the middle of a delete (the
  ``mid-write`` failpoint: the meta removed, the journal not yet). The next
  open shows the run whole or gone, never a journal without its meta, and the
  run id takes a new incarnation cleanly; the blob stays (T5).
- ``files-tail-sees-other-handle``: two handles take turns appending to one
  run; a handle that read the run (its tail cached) must refuse a seq the other
  handle stored since (``JournalOrderViolation``): the cached tail is checked
  against the file's stamp, never trusted alone (J6, X9).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.processes import stream_spawned
from rulvar_conformance.harness.site import Site, at_fresh_location
from rulvar_conformance.suites._file_children import (
    BLOB_REF,
    RUN,
    big_blob,
    big_meta,
    delete_dies_midway,
    fill_entry,
    renames_until_killed,
    torn_append,
)
from rulvar_store import JournalOrderViolation, OpenedStore, read_run_meta
from rulvar_store.backend import LocationFactory, has_single_writer_files

__all__ = ["SPEC", "file_machinery_conformance"]

CHILD_TIMEOUT_S: Final = 60.0
COMPLETE: Final = 3
"""Entries a child appends whole before its torn one."""
KILL_AFTER_S: Final = (0.3, 0.8)
"""The range the replacing child's SIGKILL timer is drawn from."""


def _machinery_site(site: Site) -> OpenedStore:
    """A first handle; stop as not run unless its journal declares the machinery."""
    opened = site.open()
    if not has_single_writer_files(opened.journal):
        not_run(
            "the store does not declare single_writer_files (no torn-tail repair, "
            "replace-by-rename or delete intent to check)"
        )
    return opened


def _child(target: Callable[..., None], *args: Any) -> dict[str, tuple[Any, ...]]:
    """Run a dying child to its death; the messages it sent, by kind.

    Stops as not run when the child did not start; fails on a setup error.
    """
    seen: dict[str, tuple[Any, ...]] = {}

    def on_message(message: tuple[Any, ...]) -> bool:
        seen[message[0]] = message[1:]
        return True

    exitcode = stream_spawned(target, args, CHILD_TIMEOUT_S, on_message)
    if "error" in seen:
        require(False, f"the child's writes failed: {seen['error'][0]}")
    if not seen:
        not_run(
            f"a spawned child process exited (code {exitcode}) without reporting; "
            "the calling program's main module must be importable and guard its "
            "entry point with if __name__ == '__main__'"
        )
    return seen


def _armed_child_died(seen: dict[str, tuple[Any, ...]], where: str) -> None:
    if "survived" in seen:
        not_run(f"the store never reached {where}, so no write can be cut there")
    require("armed" in seen, f"the child died before it reached {where}")


def _torn_tail(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        _machinery_site(site)
        seen = _child(torn_append, site.location, COMPLETE)
        _armed_child_died(seen, "an append's mid-write failpoint")
        expected = [fill_entry(seq) for seq in range(1, COMPLETE + 1)]
        reopened = site.open()
        loaded = attempt(partial(reopened.journal.load, RUN))
        require(
            loaded.ok and loaded.value == expected,
            f"after a death halfway through an append's line, expected the "
            f"{COMPLETE} complete entries back, observed "
            f"{loaded.value if loaded.ok else repr(loaded.error)} (X13)",
        )
        after = fill_entry(COMPLETE + 1)
        appended = attempt(partial(reopened.journal.append, RUN, after))
        require(
            appended.ok,
            f"an append after the torn tail failed: {appended.error!r} (X13)",
        )
        again = attempt(partial(site.open().journal.load, RUN))
        require(
            again.ok and again.value == [*expected, after],
            f"expected the complete entries and the append made after the torn "
            f"tail, observed {again.value if again.ok else repr(again.error)}: the "
            "torn bytes were not cut, so the next line was glued onto them (X13)",
        )


class _Reader:
    """Reads the meta and the blob in a loop on a thread; keeps what was not whole."""

    def __init__(self, opened: OpenedStore) -> None:
        self._opened = opened
        self._stop = threading.Event()
        self.reads = 0
        self.bad: list[str] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(CHILD_TIMEOUT_S)

    def _loop(self) -> None:
        while not self._stop.is_set() and len(self.bad) < 5:
            self.bad.extend(_not_whole(self._opened, "a read during the writes"))
            self.reads += 1


def _not_whole(opened: OpenedStore, when: str) -> list[str]:
    """What of the meta and the blob is not one whole version (empty: all whole)."""
    problems: list[str] = []
    meta = attempt(partial(read_run_meta, opened.journal, RUN))
    if not meta.ok:
        problems.append(f"{when} of the meta raised {meta.error!r}")
    elif meta.value not in (big_meta(1), big_meta(2)):
        shown = None if meta.value is None else sorted(meta.value)
        problems.append(f"{when} of the meta found no whole version ({shown})")
    blob = attempt(partial(opened.transcripts.get, BLOB_REF))
    if not blob.ok:
        problems.append(f"{when} of the blob raised {blob.error!r}")
    elif blob.value not in (big_blob(1), big_blob(2)):
        size = None if blob.value is None else len(blob.value)
        problems.append(f"{when} of the blob found {size} bytes, no whole version")
    return problems


def _replace_by_rename(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        reader = _Reader(_machinery_site(site))

        def on_ready(kind: str) -> None:
            if kind == "ready":
                reader.start()

        kill_after_s = random.uniform(*KILL_AFTER_S)
        seen: dict[str, tuple[Any, ...]] = {}

        def on_message(message: tuple[Any, ...]) -> bool:
            seen[message[0]] = message[1:]
            on_ready(message[0])
            return True

        try:
            stream_spawned(
                renames_until_killed,
                (site.location, kill_after_s),
                CHILD_TIMEOUT_S,
                on_message,
            )
        finally:
            reader.stop()
        if "error" in seen:
            require(False, f"the child's writes failed: {seen['error'][0]}")
        if "ready" not in seen:
            not_run("a spawned child process exited without reporting")
        require(
            reader.reads > 0,
            "no read ran while the child was writing (the check saw nothing)",
        )
        require(
            not reader.bad,
            f"{len(reader.bad)} of {reader.reads} reads saw a file half written: "
            f"{reader.bad[0] if reader.bad else ''} (X13: replace by rename)",
        )
        after = _not_whole(site.open(), "a fresh handle's read after the SIGKILL")
        require(not after, f"{'; '.join(after)} (X13: replace by rename)")


def _delete_intent(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared", "processes")) as site:
        _machinery_site(site)
        seen = _child(delete_dies_midway, site.location)
        _armed_child_died(seen, "a delete's mid-write failpoint")
        reopened = site.open()
        meta = read_run_meta(reopened.journal, RUN)
        entries = reopened.journal.load(RUN)
        listed = [m for m in reopened.journal.list_runs() if m.get("runId") == RUN]
        whole = meta == big_meta(1) and entries == [fill_entry(1), fill_entry(2)]
        gone = meta is None and entries == [] and listed == []
        require(
            whole or gone,
            f"after a death in the middle of a delete, expected the run whole or "
            f"gone, observed meta {'present' if meta else 'missing'}, "
            f"{len(entries)} entries, listed {len(listed)} time(s): a delete "
            "without an intent is half visible (X13)",
        )
        blob = reopened.transcripts.get(BLOB_REF)
        require(blob == b"kept", f"a delete removed the run's blob ({blob!r}; T5)")
        reopened.journal.put_meta(big_meta(2))
        reopened.journal.append(RUN, fill_entry(7))
        fresh = site.open().journal.load(RUN)
        expected = (
            [fill_entry(7)] if gone else [fill_entry(1), fill_entry(2), fill_entry(7)]
        )
        require(
            fresh == expected,
            f"the run after the interrupted delete took an append and loads "
            f"{[e.get('seq') for e in fresh]}, expected "
            f"{[e.get('seq') for e in expected]} (X13, M6)",
        )


def _tail_sees_other_handle(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("shared",)) as site:
        a = _machinery_site(site)
        b = site.open()
        run = "files-tail-run"
        for seq in (1, 2):
            a.journal.append(run, {"seq": seq, "kind": "a"})
        a.journal.load(run)  # a's tail of the run is cached from here on
        b.journal.append(run, {"seq": 3, "kind": "b"})
        again = attempt(partial(a.journal.append, run, {"seq": 3, "kind": "a-again"}))
        require(
            isinstance(again.error, JournalOrderViolation),
            f"an append of seq 3 after another handle appended seq 3 returned "
            f"{again}: the handle trusted its cached tail without the file's stamp "
            "(J6, X9: a seq tail never comes from a stale copy)",
        )
        a.journal.append(run, {"seq": 4, "kind": "a"})
        stored = [(e.get("seq"), e.get("kind")) for e in b.journal.load(run)]
        expected = [(1, "a"), (2, "a"), (3, "b"), (4, "a")]
        require(
            stored == expected,
            f"the journal after two handles took turns is {stored}, expected "
            f"{expected} (J6, X9)",
        )


_CHECKS: Final = (
    (
        "files-torn-tail-repaired",
        "a journal line torn by a SIGKILL is cut on the next open; no entry is lost",
        ("X13", "J1"),
        _torn_tail,
    ),
    (
        "files-replace-by-rename",
        "meta and blob overwrites never show a half-written file, even after SIGKILL",
        ("X13", "M2", "T1"),
        _replace_by_rename,
    ),
    (
        "files-delete-intent",
        "a delete cut by SIGKILL is whole or undone on the next open, never half",
        ("X13", "M6", "T5"),
        _delete_intent,
    ),
    (
        "files-tail-sees-other-handle",
        "a handle's cached seq tail yields to another handle's append (the file's stamp)",
        ("J6", "X9"),
        _tail_sees_other_handle,
    ),
)


def file_machinery_conformance(certification: Certification) -> ConformanceSuite:
    """The X13 checks over fresh locations (not run unless the journal declares them)."""
    locations = certification.locations
    return ConformanceSuite(
        "file-machinery",
        tuple(
            build_check(check_id, title, clauses, partial(body, locations))
            for check_id, title, clauses, body in _CHECKS
        ),
    )


SPEC: Final = SuiteSpec(
    "file-machinery",
    file_machinery_conformance,
    "single_writer_files",
    True,
    "torn-tail repair, replace-by-rename and the delete intent under SIGKILL (X13)",
)
