"""A checkpoint's pending writes, merged in place and packed one write at a time.

The writes blob (``_layout.encode_writes``) is a msgpack array of every write
stored against one checkpoint. Re-packing the whole array on every
``put_writes`` costs time in proportion to the writes already there; here each
write is packed once, when it arrives, and the blob is the array header and the
packed writes joined: the same bytes ``encode_writes`` gives (a test holds the
two equal).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

import ormsgpack

from rulvar_langgraph._layout import StoredWrite, decode_writes

__all__ = ["PendingWrites"]


def _pack(write: StoredWrite) -> bytes:
    return ormsgpack.packb(
        [write.task_id, write.idx, write.channel, list(write.value), write.task_path]
    )


def _array_header(count: int) -> bytes:
    """The msgpack header of an array of ``count`` items (fixarray, array 16, array 32)."""
    if count < 16:
        return bytes([0x90 | count])
    if count < 1 << 16:
        return b"\xdc" + struct.pack(">H", count)
    return b"\xdd" + struct.pack(">I", count)


@dataclass(slots=True)
class PendingWrites:
    """Every write stored against one checkpoint, each also kept packed."""

    writes: list[StoredWrite] = field(default_factory=list)
    packed: list[bytes] = field(default_factory=list)
    slots: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def decoded(cls, blob: bytes | None) -> PendingWrites:
        """The writes a stored blob holds (``None``: none yet)."""
        return cls.of(decode_writes(blob))

    @classmethod
    def of(cls, writes: Iterable[StoredWrite]) -> PendingWrites:
        """The writes already read back from a stored blob."""
        pending = cls()
        pending.merge(writes)
        return pending

    def merge(self, new: Iterable[StoredWrite]) -> None:
        """Regular writes insert-or-ignore by (task, idx); special (negative) ones replace."""
        for write in new:
            key = (write.task_id, write.idx)
            slot = self.slots.get(key)
            if slot is None:
                self.slots[key] = len(self.writes)
                self.writes.append(write)
                self.packed.append(_pack(write))
            elif write.idx < 0:
                self.writes[slot] = write
                self.packed[slot] = _pack(write)

    def blob(self) -> bytes:
        """The writes blob: what ``encode_writes(self.writes)`` returns."""
        return _array_header(len(self.packed)) + b"".join(self.packed)
