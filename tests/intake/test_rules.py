"""What the shared intake rules accept: everything hosts and the kit already use."""

from __future__ import annotations

import enum
from collections import OrderedDict

import pytest

from rulvar_store import InvalidArgumentError, NotJsonError
from rulvar_store.backend import (
    MAX_RUN_ID_LENGTH,
    entry_text,
    owner_for_write,
    ref_for_read,
    ref_for_write,
    run_id_for_read,
    run_id_for_write,
)

GOOD_RUN_IDS = [
    "run-1",
    "a_b%c:d.e",  # the kit tests LIKE escaping with _ and %
    "run 7",
    "ünïcödé-运行",
    "r" * MAX_RUN_ID_LENGTH,
    ".",
    "..",
]


@pytest.mark.parametrize("run_id", GOOD_RUN_IDS)
def test_ordinary_run_ids_are_accepted_for_writes(run_id: str) -> None:
    assert run_id_for_write(run_id, "append") == run_id


def test_owners_may_contain_a_slash() -> None:
    """An owner is never part of a path or ref, so host/pid owners are fine."""
    assert owner_for_write("host-1/pid-42", "acquire") == "host-1/pid-42"


@pytest.mark.clause("T3")
@pytest.mark.parametrize(
    ("ref", "run_id"),
    [("run/ckpt/7", "run"), ("run/t0", "run"), ("run", "run"), ("run/a/b/c", "run")],
)
def test_refs_name_their_run_by_the_first_segment(ref: str, run_id: str) -> None:
    assert ref_for_write(ref, "blob put") == (ref, run_id)


@pytest.mark.clause("T3")
def test_reads_take_ids_the_write_rule_refuses() -> None:
    """The reference may have written them; reading, listing, deleting stays possible."""
    for run_id in ("", "a/b", "x" * 1000):
        assert run_id_for_read(run_id, "load") == run_id
        with pytest.raises(InvalidArgumentError):
            run_id_for_write(run_id, "append")
    assert ref_for_read("/x", "blob get") == ("/x", "")


@pytest.mark.clause("D2")
def test_json_subclasses_serialize_and_foreign_values_deep_inside_are_found() -> None:
    class Level(enum.IntEnum):
        HIGH = 3

    text = entry_text({"a": OrderedDict(x=1), "b": Level.HIGH, "c": ("t", 1)})
    assert text == '{"a":{"x":1},"b":3,"c":["t",1]}'
    with pytest.raises(NotJsonError, match=r"entry\['a'\]\['x'\] is a set"):
        entry_text({"a": OrderedDict(x={3}), "b": 1})
