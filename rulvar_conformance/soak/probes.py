"""The writer's calls on every surface besides the journal append (S3-S5).

Live-tenure writes (meta, blobs, the holder's run delete, renew) go through
``SoakWriter.simple`` or ``call``. The probes must end one way: a LIVE lease
writing another run must bounce (F2); a victim run must go through its whole life
and vanish (S5); every surface tried with a dead lease must raise
``LeaseHeldError`` (S4). Anything else is logged for the referee.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from rulvar_conformance.soak.config import OTHER_RUN
from rulvar_store import Lease

if TYPE_CHECKING:
    from rulvar_conformance.soak.writer import SoakWriter, Tenure

__all__ = [
    "BLOB_SLOTS",
    "blob_delete",
    "blob_put",
    "cross_run",
    "holder_delete",
    "put_meta",
    "renew",
    "sweep",
    "victim_cycle",
]

BLOB_SLOTS: Final = 4
"""Blob refs per run (``<run>/blob-0..3``) the tenures put and delete."""


def put_meta(writer: SoakWriter, tenure: Tenure) -> None:
    lease = tenure.lease
    meta = {
        "runId": lease.run_id,
        "status": "running",
        "updatedAt": f"e{lease.epoch}",
        "soak": {"nonce": writer.nonce(tenure)},
    }
    writer.simple(tenure, "meta", lambda: writer.journal.put_meta(meta, lease))


def blob_put(writer: SoakWriter, tenure: Tenure) -> None:
    lease = tenure.lease
    ref = f"{lease.run_id}/blob-{writer.rng.randrange(BLOB_SLOTS)}"
    data = json.dumps({"soak": {"nonce": writer.nonce(tenure)}}).encode()
    writer.simple(
        tenure, "blob-put", lambda: writer.blobs.put(ref, data, lease), ref=ref
    )


def blob_delete(writer: SoakWriter, tenure: Tenure) -> None:
    lease = tenure.lease
    ref = f"{lease.run_id}/blob-{writer.rng.randrange(BLOB_SLOTS)}"
    writer.simple(
        tenure, "blob-delete", lambda: writer.blobs.delete(ref, lease), ref=ref
    )


def holder_delete(writer: SoakWriter, tenure: Tenure) -> None:
    """Delete the run under the live lease; the lease row goes with it (M6)."""
    lease = tenure.lease
    writer.simple(tenure, "delete", lambda: writer.journal.delete(lease.run_id, lease))
    tenure.ended = True


def renew(writer: SoakWriter, tenure: Tenure) -> None:
    lease = tenure.lease
    op_id, outcome = writer.call(
        "renew",
        lambda: writer.journal.renew(lease),
        run=lease.run_id,
        epoch=lease.epoch,
    )
    if outcome == "ok":
        writer.emit("step", id=op_id, op="renew", run=lease.run_id, epoch=lease.epoch)
    else:
        writer.kicked(op_id, outcome, "renew", tenure)


def cross_run(writer: SoakWriter, tenure: Tenure) -> None:
    """A LIVE lease must not write another run's blob (F2)."""
    lease = tenure.lease
    op_id, outcome = writer.call(
        "cross-run",
        lambda: writer.blobs.put(f"{OTHER_RUN}/blob", b"cross", lease),
        run=OTHER_RUN,
        epoch=lease.epoch,
        live=True,
    )
    fields = {
        "id": op_id,
        "surface": "cross-run-live",
        "run": lease.run_id,
        "epoch": lease.epoch,
    }
    if outcome == "lease":
        writer.emit("live-cross-reject", **fields)
    elif outcome == "ok":
        writer.emit("stale-accept", **fields)
    elif outcome == "order":
        writer.emit(
            "error", id=op_id, detail="cross-run put raised JournalOrderViolation"
        )
    else:
        tenure.ended = tenure.skip_sweep = True


def victim_cycle(writer: SoakWriter, tenure: Tenure) -> None:
    """S5: a side run end to end under its own lease; the victim must vanish."""
    writer.victims += 1
    vid = f"victim-w{writer.config.writer}.{writer.config.incarnation}-e{tenure.lease.epoch}-{writer.victims}"
    held: list[Lease] = []
    steps: list[tuple[str, Callable[[], object]]] = [
        ("acquire", lambda: held.append(writer.journal.acquire(vid, writer.owner))),
        (
            "append",
            lambda: writer.journal.append(vid, {"seq": 1, "kind": "step"}, held[0]),
        ),
        (
            "meta",
            lambda: writer.journal.put_meta(
                {"runId": vid, "status": "running", "updatedAt": "v"}, held[0]
            ),
        ),
        ("blob-put", lambda: writer.blobs.put(f"{vid}/b", b"victim", held[0])),
        ("blob-delete", lambda: writer.blobs.delete(f"{vid}/b", held[0])),
        ("delete", lambda: writer.journal.delete(vid, held[0])),
    ]
    for name, fn in steps:
        op_id, outcome = writer.call(f"victim-{name}", fn, run=vid)
        if outcome != "ok":
            writer.emit("step-failed", id=op_id, vid=vid, surface=name, outcome=outcome)
            if outcome == "unknown":
                tenure.ended = tenure.skip_sweep = True
            return
        writer.emit("step", id=op_id, op=f"victim-{name}", run=vid)
    writer.emit("victim", vid=vid)


def sweep(writer: SoakWriter, lease: Lease) -> None:
    older = writer.dead.setdefault(lease.run_id, [])
    probes = [lease]
    if older:
        probes.append(writer.rng.choice(older))
    older.append(lease)
    del older[:-8]
    for dead in probes:
        sweep_with(writer, dead)


def sweep_with(writer: SoakWriter, lease: Lease) -> None:
    run_id = lease.run_id
    nonce = f"stale-w{writer.config.writer}.{writer.config.incarnation}-e{lease.epoch}-{writer.calls}"

    def stale_append() -> None:
        seq = writer.tail(run_id) + 1  # re-read: the seq guard must not mask the fence
        writer.journal.append(
            run_id, {"seq": seq, "value": {"soak": {"nonce": nonce}}}, lease
        )

    meta = {
        "runId": run_id,
        "status": "cancelled",
        "updatedAt": "stale",
        "soak": {"nonce": nonce},
    }
    probes: list[tuple[str, Callable[[], object]]] = [
        ("append", stale_append),
        ("meta", lambda: writer.journal.put_meta(meta, lease)),
        (
            "blob-put",
            lambda: writer.blobs.put(f"{run_id}/blob-0", nonce.encode(), lease),
        ),
        ("blob-delete", lambda: writer.blobs.delete(f"{run_id}/blob-0", lease)),
        ("delete", lambda: writer.journal.delete(run_id, lease)),
        ("renew", lambda: writer.journal.renew(lease)),
        (
            "cross-run",
            lambda: writer.blobs.put(f"{OTHER_RUN}/blob", nonce.encode(), lease),
        ),
        ("release", lambda: writer.journal.release(lease)),
    ]
    for surface, fn in probes:
        op_id, outcome = writer.call(
            f"stale-{surface}",
            fn,
            run=run_id,
            epoch=lease.epoch,
            nonce=nonce,
            stale=True,
        )
        fields = {
            "id": op_id,
            "surface": surface,
            "run": run_id,
            "epoch": lease.epoch,
        }
        if outcome == "lease":
            writer.emit("stale-reject", **fields)
        elif outcome == "ok":
            writer.emit("stale-accept", nonce=nonce, **fields)
        elif outcome == "order":
            writer.emit(
                "error",
                id=op_id,
                finding="SEQ GUARD BEFORE FENCE",
                surface=surface,
                detail=f"its {surface} on {run_id} with superseded epoch {lease.epoch} "
                "was refused as out of order (JournalOrderViolation), not as stale",
            )
        else:
            return
