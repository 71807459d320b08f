"""The process's figures (``process_stats()``) while stores are collected.

White-box: rulvar_store._telemetry (the test holds the figures' lock, as
summing them does, to run a collected store's finalizer at that very moment).
"""

from __future__ import annotations

import gc
import threading

from rulvar_store import MemoryStore, _telemetry
from rulvar_store.ops import process_stats


def test_a_store_collected_while_the_figures_are_summed_neither_hangs_nor_is_lost() -> (
    None
):
    """The collector runs a finalizer inside whatever allocation triggers it, in
    that thread: one that took the figures' lock while that thread held it
    (``process_stats()`` allocating as it sums) waited on itself forever."""
    stores = [MemoryStore()]
    for number in range(3):
        stores[0].append("run", {"seq": number, "kind": "note"})
    before = process_stats()["calls"]

    def collect_while_summing() -> None:
        with _telemetry._PROCESS.lock:  # as summing the figures holds it
            stores.clear()  # the store's last reference outside its own cycles
            gc.collect()  # its finalizer runs here, in this thread

    collector = threading.Thread(target=collect_while_summing, daemon=True)
    collector.start()
    collector.join(timeout=10)
    assert not collector.is_alive(), "the finalizer waited on the lock its thread held"
    assert process_stats()["calls"] >= before  # the collected store's calls kept
