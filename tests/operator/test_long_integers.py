"""An integer literal longer than Python converts, written by another writer, breaks only itself.

Python refuses to turn more than ``sys.get_int_max_str_digits()`` digits (4,300
by default) into an int and raises a bare ``ValueError``. A worker in another
language or a hand edit can store such a number in a meta or an entry; every
backend's reader must then raise the typed, non-retryable
``UnreadableRecordError`` (issue 21 item 9), and the operator's listing keeps
the other runs and names the bad one.
"""

from __future__ import annotations

import json
import sys

import pytest

from rulvar_store.errors import UnreadableRecordError
from tests.operator._places import Place
from tests.operator._unreadable import (
    assert_listing_names_only_the_spoiled_run,
    seed_spoilable_and_good_runs,
)

DIGITS = sys.get_int_max_str_digits() + 700
LONG = "7" * DIGITS


def _long_meta(run_id: str) -> str:
    return json.dumps({"runId": run_id, "status": "running"})[:-1] + f', "n": {LONG}}}'


def _plant_meta(place: Place) -> None:
    if place.corrupt_meta_text is None:
        pytest.skip("the memory store has no other writer")
    place.corrupt_meta_text("run-a", _long_meta("run-a"))


def test_get_meta_and_list_runs_raise_typed(place: Place) -> None:
    seed_spoilable_and_good_runs(place)
    _plant_meta(place)
    reader = place.open().journal
    with pytest.raises(UnreadableRecordError) as caught:
        reader.get_meta("run-a")  # type: ignore[attr-defined]  # every place has meta lookup
    assert not caught.value.retryable
    assert reader.get_meta("run-b") is not None  # type: ignore[attr-defined]
    with pytest.raises(UnreadableRecordError):
        reader.list_runs()


def test_the_operator_listing_keeps_the_good_runs_and_names_the_bad(
    place: Place,
) -> None:
    seed_spoilable_and_good_runs(place)
    _plant_meta(place)
    assert_listing_names_only_the_spoiled_run(place, "convert")


def test_load_of_a_long_integer_entry_is_typed(place: Place) -> None:
    seed_spoilable_and_good_runs(place)
    text = '{"seq": 1, "kind": "step", "n": ' + LONG + "}"
    if place.foreign_entry is None:
        pytest.skip("memory: no other writer can store such an entry")
    place.foreign_entry("run-a", text)
    reader = place.open().journal
    with pytest.raises(UnreadableRecordError):
        reader.load("run-a")
    with pytest.raises(UnreadableRecordError):
        reader.load_since("run-a")  # type: ignore[attr-defined]  # every place reads incrementally
    assert len(reader.load("run-b")) == 1


@pytest.mark.parametrize("position", [2**63, 2**64 + 5, 10**30])
def test_a_cursor_past_64_bits_is_a_typed_contract_error(
    place: Place, position: int
) -> None:
    """``sqlite:9223372036854775808`` raised a bare OverflowError binding it."""
    from rulvar_store.errors import ContractError

    seed_spoilable_and_good_runs(place)
    reader = place.open().journal
    prefix = reader.load_since("run-a").cursor.split(":")  # type: ignore[attr-defined]
    cursor = ":".join([prefix[0], *[str(position)] * (len(prefix) - 1)])
    if place.backend == "file":
        # The file store's cursor is (inode, offset, crc), compared in Python: a
        # foreign inode just restarts the read.
        assert reader.load_since("run-a", cursor).restarted  # type: ignore[attr-defined]
        return
    with pytest.raises(ContractError, match="load_since"):
        reader.load_since("run-a", cursor)  # type: ignore[attr-defined]
