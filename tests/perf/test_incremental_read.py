"""Incremental reads for observers (``load_since``) on every backend (J2, J3, J5, D1, M6).

The contract (``rulvar_store/_incremental.py``): successive calls, each with the
cursor the previous one returned, yield exactly what ``load`` yields, in order;
a cursor from a deleted (and maybe recreated) run restarts the read.
"""

from __future__ import annotations

import pytest

from rulvar_store import ContractError, JournalTail, has_incremental_read
from tests.perf.conftest import StoreMaker


def entry(seq: int, **extra: object) -> dict[str, object]:
    return {"seq": seq, "kind": "step", "value": {"n": seq, "t": "ß→"}, **extra}


@pytest.mark.clause("J2")
def test_polling_returns_only_new_entries_and_adds_up_to_load(
    make_store: StoreMaker,
) -> None:
    """Each poll returns what was appended since the last; together they equal load."""
    store = make_store()
    assert has_incremental_read(store)
    first = store.load_since("run")
    assert first.entries == []  # J5: an unknown run has nothing
    assert first.restarted is False
    collected = []
    cursor = first.cursor
    seq = 0
    for batch in (1, 3, 0, 5, 2):
        for _ in range(batch):
            store.append("run", entry(seq))
            seq += 1
        tail = store.load_since("run", cursor)
        assert isinstance(tail, JournalTail)
        assert tail.restarted is False
        assert len(tail.entries) == batch
        collected += tail.entries
        cursor = tail.cursor
        assert collected == store.load("run")
    again = store.load_since("run", cursor)
    assert again.entries == []
    assert again.cursor == cursor  # nothing new: the cursor stays


@pytest.mark.clause("J3")
def test_another_handle_sees_the_new_entries_of_a_writer(
    make_store: StoreMaker,
) -> None:
    """An observer on its own handle reads exactly the writer's appends, in order."""
    writer, observer = make_store(), make_store()
    writer.append("live", entry(0))
    tail = observer.load_since("live")
    assert tail.entries == [entry(0)]
    writer.append("live", entry(1, big=2**70))
    writer.append("other", entry(0))  # another run never shows up
    writer.append("live", entry(2))
    tail = observer.load_since("live", tail.cursor)
    assert tail.entries == [entry(1, big=2**70), entry(2)]
    assert type(tail.entries[0]["big"]) is int


@pytest.mark.clause("M6")
def test_a_cursor_of_a_deleted_run_restarts_the_read(make_store: StoreMaker) -> None:
    """After delete the read restarts empty; after recreation it returns the new journal."""
    store = make_store()
    for seq in range(3):
        store.append("gone", entry(seq))
    cursor = store.load_since("gone").cursor
    store.delete("gone")
    tail = store.load_since("gone", cursor)
    assert (tail.entries, tail.restarted) == ([], True)
    store.append("gone", entry(0, generation=2))
    store.append("gone", entry(1, generation=2))
    tail = store.load_since("gone", cursor)  # the OLD cursor, from before delete
    assert tail.restarted is True
    assert tail.entries == [entry(0, generation=2), entry(1, generation=2)]
    assert tail.entries == store.load("gone")
    store.append("gone", entry(2, generation=2))
    follow = store.load_since("gone", tail.cursor)
    assert (follow.entries, follow.restarted) == ([entry(2, generation=2)], False)


@pytest.mark.clause("M6")
def test_a_recreated_run_as_long_as_before_still_restarts(
    make_store: StoreMaker,
) -> None:
    """Recreated with the same number of entries, the old cursor still restarts."""
    store = make_store()
    for seq in range(4):
        store.append("same", entry(seq, v=1))
    cursor = store.load_since("same").cursor
    store.delete("same")
    for seq in range(4):
        store.append("same", entry(seq, v=2))
    store.append("same", entry(4, v=2))
    tail = store.load_since("same", cursor)
    assert tail.restarted is True
    assert tail.entries == store.load("same")


@pytest.mark.clause("D1")
def test_malformed_or_foreign_cursors_are_refused(make_store: StoreMaker) -> None:
    """A cursor that is not this backend's raises ContractError."""
    store = make_store()
    store.append("run", entry(0))
    for bad in (
        "",
        "nonsense",
        "other:1",
        "sqlite:1:2:3:4",
        "memory:x:1",
        "file:-1:0:0",
    ):
        with pytest.raises(ContractError):
            store.load_since("run", bad)
    with pytest.raises(ContractError):
        store.load_since("run", 42)
