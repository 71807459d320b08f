"""The fenced surfaces a lease guards, and what another handle can see of a run.

Race and takeover checks drive every fenced surface the same way: ``Surface.write``
performs one leased mutation through a handle, ``state_of`` reads a run through
ANOTHER handle (STYLE: visibility is never checked through the writing one), and
``stale_everywhere`` proves that a superseded lease is refused on all of them.
Surfaces whose capability the store does not declare are skipped: a journal-only
leasable store makes no promise about blobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from rulvar_conformance.harness.kit import Outcome, attempt, not_run, require, same_json
from rulvar_store import (
    JournalEntry,
    LeasableStore,
    Lease,
    LeaseHeldError,
    OpenedStore,
    RunMeta,
    read_run_meta,
)

__all__ = [
    "OTHER_RUN",
    "SURFACES",
    "RunState",
    "Surface",
    "blob_ref",
    "entry",
    "expect_refused",
    "leasable",
    "meta",
    "prepare",
    "require_capability",
    "stale_everywhere",
    "state_of",
    "surface_named",
]

OTHER_RUN: Final = "race-other-run"
"""A run no check leases: the target of cross-run (F2) writes."""


def leasable(opened: OpenedStore) -> LeasableStore:
    """The handle's journal as a leasable store (the suites run only on ``leases``)."""
    journal = opened.journal
    require(
        isinstance(journal, LeasableStore),
        f"expected a leasable journal (acquire, renew, release), observed "
        f"{type(journal).__name__}",
    )
    assert isinstance(journal, LeasableStore)  # narrowed for the type checker
    return journal


def blob_ref(run_id: str) -> str:
    """The checkpoint ref every race check writes (X2's ``RUN/ckpt/7``)."""
    return f"{run_id}/ckpt/7"


def entry(seq: int | None, by: str, tag: int) -> JournalEntry:
    """A journal entry naming its writer; ``seq=None`` bypasses the seq guard (D5)."""
    made: JournalEntry = {
        "kind": "step",
        "status": "ok",
        "scope": "",
        "key": f"{by}-{tag}",
        "value": {"by": by, "tag": tag},
    }
    if seq is not None:
        made["seq"] = seq
    return made


def meta(run_id: str, by: str, tag: int, status: str = "running") -> RunMeta:
    """A meta record naming its writer in ``updatedAt``."""
    return {
        "runId": run_id,
        "status": status,
        "segments": tag,
        "updatedAt": f"{by}-{status}-{tag}",
    }


def blob(by: str, tag: int) -> bytes:
    return bytes([0x01, ord(by[0]), tag % 256])


@dataclass(frozen=True)
class Surface:
    """One fenced mutation: ``write(handle, lease, tag)`` on the lease's run.

    ``operation`` is the name the store passes to failpoints; ``capability`` the
    backend capability that promises the surface is fenced; ``lease_row`` marks
    renew and release, whose effect is on the lease row, not on visible data.
    """

    name: str
    operation: str
    capability: str
    write: Callable[[OpenedStore, Lease, int], None]
    lease_row: bool = False
    touches: str = "entries"


def _append(opened: OpenedStore, lease: Lease, tag: int) -> None:
    # The seq is the tag: callers pass tags above every stored seq, so a refused
    # write can never be explained by the seq guard (J7: the fence decides first).
    opened.journal.append(lease.run_id, entry(tag, "a", tag), lease)


SURFACES: Final[tuple[Surface, ...]] = (
    Surface("append", "append", "leases", _append),
    Surface(
        "put-meta",
        "put_meta",
        "fenced_writes",
        lambda o, lease, tag: o.journal.put_meta(meta(lease.run_id, "a", tag), lease),
        touches="meta",
    ),
    Surface(
        "delete",
        "delete",
        "fenced_writes",
        lambda o, lease, tag: o.journal.delete(lease.run_id, lease),
    ),
    Surface(
        "blob-put",
        "blob_put",
        "fenced_transcripts",
        lambda o, lease, tag: o.transcripts.put(
            blob_ref(lease.run_id), blob("a", tag), lease
        ),
        touches="blob",
    ),
    Surface(
        "blob-delete",
        "blob_delete",
        "fenced_transcripts",
        lambda o, lease, tag: o.transcripts.delete(blob_ref(lease.run_id), lease),
        touches="blob",
    ),
    Surface(
        "renew",
        "renew",
        "leases",
        lambda o, lease, tag: leasable(o).renew(lease),
        lease_row=True,
    ),
    Surface(
        "release",
        "release",
        "leases",
        lambda o, lease, tag: leasable(o).release(lease),
        lease_row=True,
    ),
)


def surface_named(name: str) -> Surface:
    return next(surface for surface in SURFACES if surface.name == name)


def require_capability(capabilities: frozenset[str], capability: str) -> None:
    """Stop the check as not run unless the store declares ``capability``."""
    if capability not in capabilities:
        not_run(f"the store does not declare the {capability!r} capability")


@dataclass(frozen=True)
class RunState:
    """What one handle sees of a run: journal, meta, the checkpoint blob, its refs."""

    entries: list[JournalEntry]
    meta: RunMeta | None
    blob: bytes | None
    refs: list[str]

    def same_as(self, other: RunState) -> bool:
        return (
            same_json(self.entries, other.entries)
            and same_json(self.meta, other.meta)
            and self.blob == other.blob
            and self.refs == other.refs
        )

    def __str__(self) -> str:
        keys = [item.get("key") for item in self.entries[-3:]]
        shown = ("..., " if len(self.entries) > 3 else "") + ", ".join(map(str, keys))
        status = None if self.meta is None else self.meta.get("updatedAt")
        return f"{len(self.entries)} entries [{shown}], meta {status!r}, blob {self.blob!r}"


def state_of(
    opened: OpenedStore,
    run_id: str,
    capabilities: frozenset[str],
    first: str = "entries",
) -> RunState:
    """Read the run through ``opened`` (call it with a handle that did not write).

    ``first`` (``entries``, ``meta`` or ``blob``) is read first: a race check
    reads the part a racing write would change as soon after the race as it can.
    """
    blobs = "fenced_transcripts" in capabilities
    parts: dict[str, Any] = {}
    readers: dict[str, Callable[[], Any]] = {
        "entries": lambda: opened.journal.load(run_id),
        "meta": lambda: read_run_meta(opened.journal, run_id),
        "blob": lambda: opened.transcripts.get(blob_ref(run_id)) if blobs else None,
        "refs": lambda: opened.transcripts.list_refs(run_id) if blobs else [],
    }
    for name in sorted(readers, key=lambda part: part != first):
        parts[name] = readers[name]()
    return RunState(**parts)


def prepare(
    opened: OpenedStore, lease: Lease, capabilities: frozenset[str], by: str = "a"
) -> None:
    """Give the run an entry (seq 0), a meta and a checkpoint blob under ``lease``."""
    run_id = lease.run_id
    opened.journal.append(run_id, entry(0, by, 0), lease)
    if "fenced_writes" in capabilities:
        opened.journal.put_meta(meta(run_id, by, 0), lease)
    if "fenced_transcripts" in capabilities:
        opened.transcripts.put(blob_ref(run_id), blob(by, 0), lease)


def expect_refused(outcome: Outcome[Any], what: str) -> None:
    """``what`` must have raised ``LeaseHeldError``."""
    require(not outcome.ok, f"{what}: expected LeaseHeldError, observed it succeeded")
    require(
        isinstance(outcome.error, LeaseHeldError),
        f"{what}: expected LeaseHeldError, observed {outcome.error!r}",
    )


def stale_everywhere(
    writer: OpenedStore,
    stale: Lease,
    observer: OpenedStore,
    capabilities: frozenset[str],
    why: str,
    surfaces: Iterable[Surface] = SURFACES,
) -> None:
    """Every fenced surface refuses ``stale`` and nothing changes, seen by ``observer``.

    ``why`` says how the lease went stale, for messages. The append uses a seq far
    above any stored one, so only the fence can refuse it (J7). A blob put of
    another run's ref with the stale lease (F2) is refused too.
    """
    run_id = stale.run_id
    before = state_of(observer, run_id, capabilities)
    tag = 1_000_000
    for surface in surfaces:
        if surface.capability not in capabilities:
            continue
        tag += 1
        outcome = attempt(partial(surface.write, writer, stale, tag))
        expect_refused(outcome, f"{surface.name} with a lease {why}")
        after = state_of(observer, run_id, capabilities)
        require(
            after.same_as(before),
            f"{surface.name} with a lease {why} was refused but changed the run: "
            f"expected {before}, observed {after} (F3)",
        )
    if "fenced_transcripts" in capabilities:
        cross = f"{OTHER_RUN}/ckpt/1"
        outcome = attempt(lambda: writer.transcripts.put(cross, blob("a", 9), stale))
        expect_refused(outcome, f"a cross-run blob put ({cross!r}) with a lease {why}")
        seen = observer.transcripts.get(cross)
        require(
            seen is None,
            f"a refused cross-run blob put with a lease {why}: expected no blob at "
            f"{cross!r}, observed {seen!r} (F2)",
        )
