"""The soak's companion threads and their referee (S10): every way a run can betray its log.

``verify_companions`` reads each companion's log and its run's final journal. The
referee cases write both by hand (the final journal is a plain list: the seq
guard of a real store would refuse the disorder under test); the last test runs
the threads themselves through one real SqliteStore handle.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rulvar_conformance.soak.companions import (
    companion_log_of,
    companion_run,
    companion_runs_in,
    start_companions,
    stop_companions,
    verify_companions,
)
from rulvar_conformance.soak.config import SoakWriterConfig
from rulvar_conformance.soak.snapshot import FinalState, RunState, read_final_state
from rulvar_store_sqlite import SqliteStore

RUN = companion_run(0, 0, 0)


def _log(logs: Path, *lines: str, torn: str = "") -> None:
    text = "".join(f"{line}\n" for line in (f"run {RUN}", *lines)) + torn
    (logs / "w0.0.jsonl.companion-0").write_text(text)


def _final_state(*seqs: int) -> FinalState:
    """The snapshot the referee judges: the companion run's entries, as stored."""
    entries = tuple({"seq": seq, "kind": "companion"} for seq in seqs)
    return FinalState({RUN: RunState(entries=entries)})


@pytest.mark.clause("S10")
def test_a_run_that_matches_its_log_passes(tmp_path: Path) -> None:
    """Acknowledged appends stored in order; a killed process's in-flight one may be too."""
    _log(tmp_path, "invoke 0", "ok 0", "invoke 1", "ok 1", "invoke 2")
    for stored in ((0, 1), (0, 1, 2)):
        check = verify_companions(_final_state(*stored), tmp_path)
        assert check.violations == []
        assert (check.runs, check.appends) == (1, 2)


@pytest.mark.clause("S10")
@pytest.mark.parametrize(
    ("lines", "stored", "violation"),
    [
        (("invoke 0", "ok 0", "invoke 1", "ok 1"), (0,), "COMPANION LOST ACK"),
        (("invoke 0", "ok 0"), (0, 1), "COMPANION PHANTOM"),
        (("invoke 0", "ok 0", "invoke 1", "ok 1"), (0, 0, 1), "COMPANION ORDER"),
        (("invoke 0", "invoke 1", "ok 1"), (0, 1), "COMPANION UNACKED"),
        (("invoke 0", "ok 0", "invoke 1", "stopped"), (0, 1), "COMPANION UNACKED"),
        (("invoke 0", "error 0 StoreClosedError()"), (), "COMPANION ERROR"),
    ],
    ids=["lost-ack", "phantom", "order", "unacked-middle", "unacked-clean", "error"],
)
def test_each_betrayal_of_the_log_is_a_violation(
    tmp_path: Path, lines: tuple[str, ...], stored: tuple[int, ...], violation: str
) -> None:
    """Lost, phantom, out-of-order, unexplained or failed appends are named."""
    _log(tmp_path, *lines)
    found = verify_companions(_final_state(*stored), tmp_path).violations
    assert any(item.kind == violation for item in found), found


@pytest.mark.clause("S10")
def test_unknown_outcomes_and_a_torn_last_line_are_tolerated(tmp_path: Path) -> None:
    """An unknown append may have landed; a line cut by SIGKILL is not read."""
    _log(tmp_path, "invoke 0", "unknown 0", "invoke 0", "landed 0", torn="invo")
    check = verify_companions(_final_state(0), tmp_path)
    assert check.violations == []
    assert check.appends == 1


@pytest.mark.clause("S10")
@pytest.mark.clause("X7")
def test_companion_threads_append_through_one_sqlite_handle(tmp_path: Path) -> None:
    """Three threads on one store handle: logs and runs agree after a clean stop."""
    config = SoakWriterConfig(
        writer=3,
        incarnation=1,
        seed=1,
        ttl_ms=250,
        report_path=str(tmp_path / "w"),
        companions=3,
    )
    with SqliteStore(str(tmp_path / "c.db")) as store:
        company = start_companions(store, config)
        deadline = time.monotonic() + 30
        while sum(len(store.load(companion_run(3, 1, n))) for n in range(3)) < 30:
            assert time.monotonic() < deadline, "the companions never appended"
            time.sleep(0.005)
        stop_companions(*company)
        state = read_final_state(
            store, store.transcripts(), companion_runs_in(tmp_path)
        )
        check = verify_companions(state, tmp_path)
    assert check.violations == []
    assert check.runs == 3
    assert check.appends >= 30
    assert Path(companion_log_of(config, 2)).read_text().endswith("stopped\n")
