"""Copy and move between every pair of backends (V1-V3, V5): records arrive equal, epochs carried.

The kinds: memory, file, SQLite, PostgreSQL (two places of it are two schemas:
the between-schemas pair), and ``spi``, a third-party store offering only the
SPI. Where both stores show stored text, the entries must arrive byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import pytest

from rulvar_store.errors import RunMovedError
from rulvar_store.ops import copy_run, copy_runs, has_run_rows, verify_run
from tests.move._places import (
    LEASABLE,
    Place,
    blob_map,
    entry_texts,
    epoch_of,
    iter_pairs,
    seed,
)

PAIRS = list(iter_pairs())
MOVABLE = ("memory", "sqlite", "postgres")


def _same_entries(src: Place, dst: Place, run_id: str) -> None:
    src_entries, dst_entries = (
        entry_texts(src.pair, run_id),
        entry_texts(dst.pair, run_id),
    )
    if has_run_rows(src.pair.journal) and has_run_rows(dst.pair.journal):
        assert dst_entries == src_entries  # stored text, byte for byte
    else:
        assert dst.pair.journal.load(run_id) == src.pair.journal.load(run_id)


@pytest.mark.clause("V1")
@pytest.mark.clause("V2")
@pytest.mark.parametrize(
    ("src_kind", "dst_kind"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS]
)
def test_copy_carries_records_byte_equal_and_the_epoch_above_V1_V2(
    places: Callable[[str], Place], src_kind: str, dst_kind: str
) -> None:
    """V1: journal, meta and blobs arrive equal; V2: the destination's counter ends above."""
    src, dst = places(src_kind), places(dst_kind)
    for run_id in ("run-a", "run-b"):
        seed(src.pair, run_id)
    for run_id in ("run-a", "run-b"):
        outcome = copy_run(src.pair, dst.pair, run_id, verify=True)
        assert outcome.action == "copied", outcome
        assert outcome.entries == 7
        assert outcome.blobs == 3
    for run_id in ("run-a", "run-b"):
        _same_entries(src, dst, run_id)
        assert dst.pair.journal.get_meta(run_id) == src.pair.journal.get_meta(run_id)
        assert blob_map(dst.pair, run_id) == blob_map(src.pair, run_id)
        assert verify_run(src.pair, dst.pair, run_id) == []
        if src_kind in LEASABLE and dst_kind in LEASABLE:
            assert epoch_of(dst.pair, run_id) > epoch_of(src.pair, run_id)


@pytest.mark.clause("V6")
@pytest.mark.parametrize(
    ("src_kind", "dst_kind"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS]
)
def test_a_second_copy_writes_nothing_twice_V6(
    places: Callable[[str], Place], src_kind: str, dst_kind: str
) -> None:
    """V6: copying again is idempotent: no entry or blob is written a second time."""
    src, dst = places(src_kind), places(dst_kind)
    seed(src.pair, "run-a")
    copy_run(src.pair, dst.pair, "run-a")
    again = copy_run(src.pair, dst.pair, "run-a", verify=True)
    assert (again.action, again.entries, again.blobs) == ("copied", 0, 0)
    assert len(dst.pair.journal.load("run-a")) == 7


@pytest.mark.clause("V3")
@pytest.mark.clause("V4")
@pytest.mark.parametrize(
    ("src_kind", "dst_kind"),
    [(a, b) for a, b in PAIRS if a in MOVABLE],
    ids=[f"{a}-to-{b}" for a, b in PAIRS if a in MOVABLE],
)
def test_move_fences_the_source_and_names_the_destination_V3_V4(
    places: Callable[[str], Place], src_kind: str, dst_kind: str
) -> None:
    """V3: after a move the destination's counter is above the tombstone's; V4: the source refuses."""
    src, dst = places(src_kind), places(dst_kind)
    seed(src.pair, "run-a")
    zombie = src.pair.journal.acquire("run-a", "worker")
    src.pair.journal.release(
        zombie
    )  # a released owner: it can never write again anyway
    outcome = copy_run(
        src.pair, dst.pair, "run-a", move=True, destination_name="dest://x"
    )
    assert outcome.action == "moved", outcome
    with pytest.raises(RunMovedError) as refused:
        src.pair.journal.acquire("run-a", "worker")
    assert refused.value.destination == "dest://x"
    assert refused.value.retryable is False
    _same_entries(src, dst, "run-a")  # the source keeps its records, fenced
    if dst_kind in LEASABLE:
        tombstone = src.pair.journal.epoch_counter("run-a")
        assert epoch_of(dst.pair, "run-a") > tombstone
    again = copy_run(
        src.pair, dst.pair, "run-a", move=True, destination_name="dest://x"
    )
    assert again.action == "already-moved"
    elsewhere = copy_run(
        src.pair, dst.pair, "run-a", move=True, destination_name="dest://y"
    )
    assert elsewhere.action == "skipped"
    assert "dest://x" in elsewhere.detail


@pytest.mark.clause("V1")
def test_text_another_writer_stored_arrives_byte_for_byte_V1(
    places: Callable[[str], Place],
) -> None:
    """V1: a row with a foreign writer's spacing and key order reaches PostgreSQL unchanged."""
    src, dst = places("sqlite"), places("postgres")
    seed(src.pair, "run-a", entries=1)
    assert src.url is not None
    foreign = '{ "seq" : 5,"kind":"x",  "a":[1,2.50]}'
    connection = apsw.Connection(src.url.removeprefix("sqlite:///"))
    connection.execute(
        "INSERT INTO entries (run_id, payload) VALUES (?, ?)", ("run-a", foreign)
    )
    connection.close()
    assert copy_run(src.pair, dst.pair, "run-a", verify=True).action == "copied"
    assert entry_texts(dst.pair, "run-a")[-1] == foreign


@pytest.mark.clause("V6")
@pytest.mark.clause("V5")
def test_grouped_small_runs_fall_back_run_by_run_V5_V6(
    places: Callable[[str], Place],
) -> None:
    """V6/V5: many small runs go in one PostgreSQL transaction; a group holding a run
    already begun there, or one under a live owner, is written run by run instead:
    the begun one is completed, the held one skipped, the rest copied."""
    src, dst = places("sqlite"), places("postgres")
    run_ids = [f"run-{n}" for n in range(6)]
    for run_id in run_ids:
        seed(src.pair, run_id)
    begun = src.pair.journal.load("run-2")[:3]
    lease = dst.pair.journal.acquire("run-2", "earlier-copy")
    for entry in begun:
        dst.pair.journal.append("run-2", entry, lease)
    dst.pair.journal.release(lease)
    holder = dst.pair.journal.acquire("run-4", "live-owner")
    outcomes = {o.run_id: o for o in copy_runs(src.pair, dst.pair, run_ids)}
    assert outcomes["run-4"].action == "skipped"
    assert "live-owner" in outcomes["run-4"].detail
    assert outcomes["run-2"].action == "copied"
    assert outcomes["run-2"].entries == 4
    for run_id in run_ids:
        if run_id != "run-4":
            assert verify_run(src.pair, dst.pair, run_id) == []
    assert dst.pair.journal.load("run-4") == []
    dst.pair.journal.release(holder)
    grouped = list(copy_runs(src.pair, dst.pair, ["run-4"]))
    assert grouped[0].action == "copied"
    assert verify_run(src.pair, dst.pair, "run-4") == []
