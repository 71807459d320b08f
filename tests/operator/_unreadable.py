"""Two runs, one of which another writer spoils: the unreadable-record tests' shared part.

``run-a`` holds a dispatch and is the run a test spoils (a meta or an entry
this process cannot read); ``run-b`` holds one ok step and must stay readable.
"""

from __future__ import annotations

from rulvar_store.ops import iter_listed_runs
from tests.operator._journals import entry, running, write_run
from tests.operator._places import Place


def seed_spoilable_and_good_runs(place: Place) -> None:
    """Write ``run-a`` (to be spoiled) and ``run-b`` (stays good), both running."""
    store = place.open().journal
    write_run(store, "run-a", [running(0)], "running")
    write_run(store, "run-b", [entry(0, "step", "ok")], "running")


def assert_listing_names_only_the_spoiled_run(place: Place, says: str) -> None:
    """The operator listing keeps ``run-b`` and gives ``run-a`` a problem saying ``says``."""
    listed = {run.run_id: run for run in iter_listed_runs(place.open().journal)}
    assert listed["run-b"].problem is None
    assert listed["run-a"].problem is not None
    assert says in listed["run-a"].problem
