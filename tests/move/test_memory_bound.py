"""A copy's memory is bounded by its batch, not by the run (V8)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest

from rulvar_store.ops import copy_run, verify_run
from tests.move._places import Place

ENTRIES = 24_000
PAD = "x" * 1_000  # about 24 MB of journal text


@pytest.mark.clause("V8")
@pytest.mark.parametrize("dst_kind", ["sqlite", "postgres"])
def test_a_long_run_is_copied_in_bounded_memory_V8(
    places: Callable[[str], Place], dst_kind: str
) -> None:
    """V8: copying a 24 MB journal allocates a fraction of it at any moment (one batch)."""
    src, dst = places("sqlite"), places(dst_kind)
    journal = src.pair.journal
    lease = journal.acquire("long", "seeder")
    for start in range(0, ENTRIES, 2_000):
        texts = [
            f'{{"seq":{n + 1},"pad":"{PAD}"}}' for n in range(start, start + 2_000)
        ]
        journal.write_rows(
            "long", lease, expected_entries=start, entries=texts, meta=None, epoch=0
        )
    journal.put_meta({"runId": "long", "status": "running"}, lease)
    journal.release(lease)
    run_bytes = ENTRIES * len(PAD)
    tracemalloc.start()
    try:
        outcome = copy_run(src.pair, dst.pair, "long")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.action == "copied"
    assert outcome.entries == ENTRIES
    assert peak < run_bytes / 3, (
        f"peak {peak / 2**20:.1f} MiB for a {run_bytes / 2**20:.0f} MiB run"
    )
    assert verify_run(src.pair, dst.pair, "long") == []
