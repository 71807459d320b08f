"""How many calls one fenced SQLite append makes across project files.

A profile hook counts each call whose caller and callee are project modules
in different files (a structural count, not a time). The figure is quoted in
the history of the SQLite door; it may go down, and a rise must be a decision:
raise ``BOUND`` in the same change and say why.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any, Final

from rulvar_store.backend import set_failpoint_hook
from rulvar_store_sqlite import SqliteStore

ROOT: Final = str(Path(__file__).resolve().parents[2]) + "/"
TESTS: Final = ROOT + "tests/"
BOUND: Final = 29
"""16 after the one transaction door; +5 when the transaction moved to its own
module (one job each); the fork guard's check; the instance lock lives in the
door's module (was +3 from its own file): 21. Then +3 from main's hardening
merged in: the file-identity check before each commit (a callback from the
transaction into the door, then into _file_identity) and the exact seq text
(_exact_seq). Then +5 for telemetry, counted with the OpenTelemetry API
installed and no SDK: the instrumented method's wrapper calls the method, asks
``_otel`` whether an SDK records (one check, no span), adds to the counters
(``_store_stats``), and the door hands the batch size to the recorder, which
passes it to ``_otel`` (26 without the API installed)."""


def _crossings(store: SqliteStore, call: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        callee_file = frame.f_code.co_filename
        caller_file = caller.f_code.co_filename
        if (
            callee_file != caller_file
            and callee_file.startswith(ROOT)
            and caller_file.startswith(ROOT)
            and not callee_file.startswith(TESTS)
            and not caller_file.startswith(TESTS)
        ):
            seen.append((caller.f_code.co_name, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_one_fenced_append_crosses_files_at_most_bound_times(tmp_path: Path) -> None:
    set_failpoint_hook(None)
    store = SqliteStore(str(tmp_path / "x.db"), ttl_ms=60_000)
    try:
        lease = store.acquire("run", "owner")
        store.append("run", {"kind": "step", "seq": 0}, lease)  # warm: boot, caches
        crossed = _crossings(
            store, lambda: store.append("run", {"kind": "step", "seq": 1}, lease)
        )
    finally:
        store.close()
    assert [entry["seq"] for entry in store_load(tmp_path)] == [0, 1]
    assert 0 < len(crossed) <= BOUND, crossed


def store_load(tmp_path: Path) -> list[Any]:
    with SqliteStore(str(tmp_path / "x.db")) as again:
        return list(again.load("run"))
