"""Where a LangGraph thread lives in a rulvar store, and how its records are encoded.

A thread is one run. Its checkpoints and pending writes are fenced blobs under
the run's ref prefix, so ``delete_run``, the blob deletes of ``prune`` and
``delete_for_runs`` give their bytes back. Everything of one checkpoint lies
under that checkpoint's own base ref, so one ``get_under`` (T13) reads it
whole:

```
<run>/c/<ns>/<cid>/z           the checkpoint: serialized checkpoint, metadata, parent id
<run>/c/<ns>/<cid>/w/t<digest> one task's pending writes against it (a put_writes
                               rewrites only its own task's blob)
written by earlier versions only, still read, and deleted with what they belong to:
<run>/c/<ns>/<cid>             the checkpoint
<run>/w/<ns>/<cid>             every pending write of the checkpoint in one blob
<run>/p/<ns>                   a pointer to the newest checkpoint: ignored on read
```

``<ns>`` is the checkpoint namespace hex-encoded behind an ``n`` (``""`` is ``n``),
which keeps every segment a safe token for the file and memory blob stores and
keeps namespaces apart: a namespace's checkpoint prefix ``<run>/c/<ns>/`` ends
at its own ``/``, and the hex holds none, so it never prefixes another
namespace's refs. LangGraph's checkpoint ids are uuid6 strings (time fields
first, fixed-width lowercase hex), so the newest checkpoint of a namespace is
found by its greatest ref under that prefix (``last_ref``, T12); the leaf
``z`` sorts after ``w``, so that ref is the checkpoint's own blob, not one of
its writes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final, Literal

import ormsgpack

from rulvar_store import InvalidArgumentError
from rulvar_store.backend import is_safe_token
from rulvar_store.ops import (
    THREAD_NAME,
    THREAD_TAG,
    run_for_thread,
    thread_for_run,
)

__all__ = [
    "META_NAME",
    "META_TAG",
    "CheckpointRecord",
    "StoredWrite",
    "checkpoint_base",
    "checkpoint_prefix",
    "checkpoint_ref",
    "decode_checkpoint",
    "decode_writes",
    "encode_checkpoint",
    "encode_writes",
    "ns_of_segment",
    "old_checkpoint_ref",
    "pointer_ref",
    "run_for_thread",
    "split_ref",
    "task_writes_ref",
    "thread_for_run",
    "writes_ref",
]

META_NAME: Final = THREAD_NAME
CHECKPOINT_LEAF: Final = "z"
"""The checkpoint's own blob under its base: sorts after its writes' ``w``."""
META_TAG: Final = THREAD_TAG

TypedBytes = tuple[str, bytes]


def _ns_segment(checkpoint_ns: str) -> str:
    return "n" + checkpoint_ns.encode().hex()


def ns_of_segment(segment: str) -> str:
    """Invert the namespace segment of a ref."""
    return bytes.fromhex(segment[1:]).decode()


def checkpoint_prefix(run_id: str, checkpoint_ns: str) -> str:
    """What every checkpoint ref of the namespace starts with, and no other ref."""
    return f"{run_id}/c/{_ns_segment(checkpoint_ns)}/"


def checkpoint_base(run_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """The ref every blob of one checkpoint is, or lies under (``get_under``'s prefix)."""
    return checkpoint_prefix(run_id, checkpoint_ns) + _checked_id(checkpoint_id)


def checkpoint_ref(run_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """The checkpoint's own blob."""
    return checkpoint_base(run_id, checkpoint_ns, checkpoint_id) + "/" + CHECKPOINT_LEAF


def old_checkpoint_ref(run_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Where earlier versions stored the checkpoint (read, never written now)."""
    return checkpoint_base(run_id, checkpoint_ns, checkpoint_id)


def task_writes_ref(
    run_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str
) -> str:
    """One task's writes against the checkpoint.

    The segment is a digest of the task id: a safe token of fixed length
    whatever the id holds (the id itself is stored inside the blob).
    """
    digest = hashlib.blake2b(task_id.encode(), digest_size=16).hexdigest()
    return f"{checkpoint_base(run_id, checkpoint_ns, checkpoint_id)}/w/t{digest}"


def writes_ref(run_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Where earlier versions stored every write of the checkpoint in one blob."""
    return f"{run_id}/w/{_ns_segment(checkpoint_ns)}/{_checked_id(checkpoint_id)}"


def pointer_ref(run_id: str, checkpoint_ns: str) -> str:
    """The pointer blob earlier versions kept per namespace (only deleted now)."""
    return f"{run_id}/p/{_ns_segment(checkpoint_ns)}"


RefKind = Literal["c", "w", "oc", "ow", "p"]
"""A ref's role: checkpoint, a task's writes, an earlier version's checkpoint,
an earlier version's writes blob, an earlier version's pointer."""


def split_ref(ref: str) -> tuple[RefKind, str, str] | None:
    """Return ``(kind, checkpoint_ns, checkpoint_id)`` of a ref this package writes or wrote.

    Pointers give an empty id; refs this package did not write give ``None``.
    """
    parts = ref.split("/")
    if len(parts) == 3 and parts[1] == "p":
        return "p", ns_of_segment(parts[2]), ""
    if len(parts) < 4 or parts[1] not in ("c", "w"):
        return None
    ns, cid = ns_of_segment(parts[2]), parts[3]
    tail = parts[4:]
    if parts[1] == "w":
        return ("ow", ns, cid) if not tail else None
    if not tail:
        return "oc", ns, cid
    if tail == [CHECKPOINT_LEAF]:
        return "c", ns, cid
    if len(tail) == 2 and tail[0] == "w":
        return "w", ns, cid
    return None


def _checked_id(checkpoint_id: object) -> str:
    # Checkpoint ids are uuid6 strings; anything else would escape its ref segment.
    if not isinstance(checkpoint_id, str) or not is_safe_token(checkpoint_id):
        raise InvalidArgumentError(
            f"checkpoint_id must be a safe token such as a uuid, got {checkpoint_id!r}",
            "checkpoint",
            "checkpoint_id",
        )
    return checkpoint_id


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One stored checkpoint, still serialized by the saver's serde."""

    checkpoint: TypedBytes
    metadata: TypedBytes
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class StoredWrite:
    """One pending write, still serialized; ``idx`` is its slot (negative for specials)."""

    task_id: str
    idx: int
    channel: str
    value: TypedBytes
    task_path: str


def encode_checkpoint(record: CheckpointRecord) -> bytes:
    return ormsgpack.packb(
        [list(record.checkpoint), list(record.metadata), record.parent_id]
    )


def decode_checkpoint(blob: bytes) -> CheckpointRecord:
    checkpoint, metadata, parent_id = ormsgpack.unpackb(blob)
    return CheckpointRecord(
        (checkpoint[0], checkpoint[1]), (metadata[0], metadata[1]), parent_id
    )


def encode_writes(writes: list[StoredWrite]) -> bytes:
    return ormsgpack.packb(
        [[w.task_id, w.idx, w.channel, list(w.value), w.task_path] for w in writes]
    )


def decode_writes(blob: bytes | None) -> list[StoredWrite]:
    if blob is None:
        return []
    rows: list[list[Any]] = ormsgpack.unpackb(blob)
    return [
        StoredWrite(task_id, idx, channel, (value[0], value[1]), task_path)
        for task_id, idx, channel, value, task_path in rows
    ]
