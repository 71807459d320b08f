"""A record nested past Python's parser, written by another writer, breaks only itself.

A worker in another language can store a meta or an entry nested 1,500 deep
(PostgreSQL's jsonb and the file store's JSONL take it; SQLite's JSON functions
stop at 1,000 levels, and this process's own writes refuse it typed at intake).
Reading it raises the typed, non-retryable ``UnreadableRecordError``, never a
bare ``RecursionError``, and the operator's listing keeps every other run and
names the bad one.
"""

from __future__ import annotations

import json

import pytest

from rulvar_store.backend import load_record
from rulvar_store.errors import (
    ContractError,
    InvalidArgumentError,
    UnreadableRecordError,
)
from tests.operator._places import Place, invoke
from tests.operator._unreadable import (
    assert_listing_names_only_the_spoiled_run,
    seed_spoilable_and_good_runs,
)

DEPTH = 1_500


def _deep_text(run_id: str) -> str:
    return json.dumps({"runId": run_id, "status": "running"})[:-1] + (
        ', "x": ' + "[" * DEPTH + "]" * DEPTH + "}"
    )


def _deep_value() -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(DEPTH):
        child: list[object] = []
        node.append(child)
        node = child
    return root


def test_a_deep_text_is_a_typed_error_not_a_recursion_error() -> None:
    with pytest.raises(UnreadableRecordError) as caught:
        load_record(_deep_text("run-a"))
    assert not caught.value.retryable
    assert isinstance(caught.value, ValueError)


def _foreign_deep_meta(place: Place) -> None:
    if place.corrupt_meta_text is None:
        pytest.skip(
            "the memory store has no other writer: it holds this process's objects"
        )
    if place.backend == "sqlite":
        pytest.skip("SQLite's JSON functions refuse nesting past 1,000 levels at write")
    place.corrupt_meta_text("run-a", _deep_text("run-a"))


def test_this_process_refuses_a_deep_meta_at_intake(place: Place) -> None:
    """No store of this process's own writes such a record: typed, nothing persisted."""
    store = place.open().journal
    with pytest.raises(InvalidArgumentError):
        store.put_meta({"runId": "run-a", "status": "running", "x": _deep_value()})
    assert store.get_meta("run-a") is None  # type: ignore[attr-defined]  # every place has meta lookup


def test_get_meta_of_a_deep_meta_is_typed(place: Place) -> None:
    seed_spoilable_and_good_runs(place)
    _foreign_deep_meta(place)
    reader = place.open().journal
    with pytest.raises(ContractError) as caught:
        reader.get_meta("run-a")  # type: ignore[attr-defined]  # every place has meta lookup
    assert not caught.value.retryable
    assert reader.get_meta("run-b") is not None  # type: ignore[attr-defined]  # the other run reads


def test_list_runs_with_a_deep_meta_names_it_and_keeps_the_good_records(
    place: Place,
) -> None:
    """The SPI listing: typed, not retryable, the bad run named, the rest kept."""
    seed_spoilable_and_good_runs(place)
    _foreign_deep_meta(place)
    with pytest.raises(UnreadableRecordError) as caught:
        place.open().journal.list_runs()
    error = caught.value
    assert not error.retryable
    assert error.run_ids == ("run-a",)
    assert "'run-a'" in str(error)
    assert [meta["runId"] for meta in error.readable] == ["run-b"]


def test_an_unreadable_listing_error_pickles_with_its_records() -> None:
    """Errors cross processes (the soak): the kept records and names travel too."""
    import pickle

    error = UnreadableRecordError("m", [{"runId": "run-b"}], ["run-a"])
    again = pickle.loads(pickle.dumps(error))
    assert (again.readable, again.run_ids, str(again)) == (
        [{"runId": "run-b"}],
        ("run-a",),
        "m",
    )


def test_the_operator_listing_keeps_the_good_runs_and_names_the_bad(
    place: Place,
) -> None:
    seed_spoilable_and_good_runs(place)
    _foreign_deep_meta(place)
    assert_listing_names_only_the_spoiled_run(place, "deeper")


def test_rulvar_runs_list_names_the_deep_run_and_lists_the_rest(
    url_place: Place,
) -> None:
    seed_spoilable_and_good_runs(url_place)
    _foreign_deep_meta(url_place)
    assert url_place.url is not None
    result = invoke("runs", "list", url_place.url)
    assert result.exit_code == 1
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert "unreadable" in lines["run-a"]
    assert "running" in lines["run-b"]
    assert "Traceback" not in result.stderr


def test_load_of_a_deep_entry_is_typed(place: Place) -> None:
    """The journal's reader too: a deep entry from another writer is typed."""
    seed_spoilable_and_good_runs(place)
    deep = '{"seq": 1, "kind": "step", "x": ' + "[" * DEPTH + "]" * DEPTH + "}"
    if place.foreign_entry is None or place.backend == "sqlite":
        # SQLite's JSON functions (its index) refuse nesting past 1,000 levels.
        pytest.skip(f"{place.backend}: no other writer can store such an entry")
    place.foreign_entry("run-a", deep)
    reader = place.open().journal
    with pytest.raises(ContractError) as caught:
        reader.load("run-a")
    assert not caught.value.retryable
    assert len(reader.load("run-b")) == 1
