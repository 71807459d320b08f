"""The writes blob packed write by write is the blob packed whole (G14)."""

from __future__ import annotations

import pytest

from rulvar_langgraph._layout import StoredWrite, decode_writes, encode_writes
from rulvar_langgraph._pending import PendingWrites


def _write(task: int, idx: int, value: bytes = b"v") -> StoredWrite:
    return StoredWrite(f"task-{task}", idx, "chan", ("msgpack", value), "path")


@pytest.mark.clause("G14")
@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 65_535, 65_536, 65_537])
def test_the_blob_is_byte_identical_at_every_array_header_size(count: int) -> None:
    """fixarray, array 16 and array 32 headers: the same bytes as encode_writes."""
    writes = [_write(i, 0) for i in range(count)]
    pending = PendingWrites()
    pending.merge(writes)
    assert pending.blob() == encode_writes(writes)
    assert decode_writes(pending.blob()) == writes


@pytest.mark.clause("G14")
def test_merge_ignores_a_repeated_regular_write_and_replaces_a_special_one() -> None:
    """Regular writes insert-or-ignore by (task, idx); negative idx replaces in place."""
    pending = PendingWrites.decoded(encode_writes([_write(1, 0), _write(1, -1)]))
    pending.merge([_write(1, 0, b"again"), _write(1, -1, b"new"), _write(2, 0)])
    expected = [_write(1, 0), _write(1, -1, b"new"), _write(2, 0)]
    assert pending.writes == expected
    assert pending.blob() == encode_writes(expected)
    assert PendingWrites.decoded(None).blob() == encode_writes([])
