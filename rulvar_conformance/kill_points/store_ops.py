"""The store-level kill-point cases: the table, the prepared run, the operation.

Shared by the child (``run_store_child``: take the lease, arm the failpoint hook,
perform the operation, die) and the referee (the prepared old state, the
expected new state, and ``probe_points``, which runs the operation in-process
with a recording hook to learn which failpoints the store's path has).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from rulvar_conformance.kill_points.child import (
    KillPointWorkerConfig,
    ReportWriter,
    sigkill_self,
)
from rulvar_store import (
    BatchTranscriptStore,
    LeasableStore,
    Lease,
    OpenedStore,
    has_batch_put,
    read_run_meta,
)
from rulvar_store.backend import (
    LocationOpener,
    StoreLocation,
    set_failpoint_hook,
    stable_stringify,
    system_clock_ms,
)

__all__ = [
    "ALL_POINTS",
    "CHILD_TTL_MS",
    "EITHER_POINTS",
    "NOTHING_POINTS",
    "OLD_META",
    "OPERATIONS",
    "RENEW_GAP_MS",
    "RUN",
    "STORE_CASES",
    "State",
    "StoreCase",
    "describe",
    "entry",
    "expected_states",
    "leasable_of",
    "lease_before_after",
    "prepare_run",
    "probe_points",
    "run_store_child",
    "visible_state",
]

RUN: Final = "kp-store"
REF: Final = f"{RUN}/ckpt/1"
# The second blob of the batch row: a kill must leave both old or both new (T11).
BATCH_REF: Final = f"{RUN}/ckpt/2"
CHILD_TTL_MS: Final = 30_000
# A renew waits this long after its acquire, so the two expiries lie far apart.
RENEW_GAP_MS: Final = 400

OPERATIONS: Final = (
    "append",
    "put_meta",
    "delete",
    "acquire",
    "renew",
    "release",
    "blob_put",
    "blob_put_many",
    "blob_delete",
)
LEASE_OPERATIONS: Final = frozenset({"acquire", "renew", "release"})
NOTHING_POINTS: Final = frozenset({"after-begin", "after-fence-check", "before-commit"})
ALL_POINTS: Final = frozenset({"after-commit", "after-rename"})
EITHER_POINTS: Final = frozenset(
    {"after-send", "mid-write", "after-write", "after-fsync"}
)
TRANSACTION_POINTS: Final = (
    "after-begin",
    "after-fence-check",
    "before-commit",
    "after-send",
    "after-commit",
)
FILE_POINTS: Final = {
    "append": ("mid-write", "after-write"),
    "put_meta": ("after-write", "after-fsync", "after-rename"),
    "delete": ("mid-write",),
    "blob_put": ("after-write", "after-fsync", "after-rename"),
}

_CLAUSES: Final[Mapping[str, tuple[str, ...]]] = {
    "append": ("J1", "J6", "L7", "F3"),
    "put_meta": ("M2", "L7", "F3"),
    "delete": ("M6", "L5", "L7", "F3"),
    "acquire": ("L2", "L3"),
    "renew": ("L8", "L7"),
    "release": ("L6", "L4"),
    "blob_put": ("T1", "T6", "F3"),
    "blob_put_many": ("T11", "T6", "F3"),
    "blob_delete": ("T6", "F3"),
}


@dataclass(frozen=True)
class StoreCase:
    """One row of the store-level table."""

    operation: str
    point: str

    @property
    def id(self) -> str:
        return f"kp-store-{self.operation.replace('_', '-')}-{self.point}"

    @property
    def clauses(self) -> tuple[str, ...]:
        return ("K5", *_CLAUSES[self.operation])


STORE_CASES: Final[tuple[StoreCase, ...]] = tuple(
    StoreCase(operation, point)
    for operation in OPERATIONS
    for point in (*TRANSACTION_POINTS, *FILE_POINTS.get(operation, ()))
)
"""Every operation at every failpoint any reference store has (54 cases)."""

OLD_META: Final = {"runId": RUN, "status": "running", "updatedAt": "t0", "mark": "old"}
NEW_META: Final = {"runId": RUN, "status": "ok", "updatedAt": "t1", "mark": "new"}


def entry(seq: int, mark: str) -> dict[str, Any]:
    return {"hashVersion": 2, "seq": seq, "kind": "step", "status": "ok", "mark": mark}


# -- the operation, as both the probe and the child perform it -----------------


def leasable_of(opened: OpenedStore) -> LeasableStore | None:
    journal = opened.journal
    return journal if isinstance(journal, LeasableStore) else None


def _perform(opened: OpenedStore, operation: str, lease: Lease | None) -> None:
    journal, blobs = opened.journal, opened.transcripts
    leases = leasable_of(opened)
    if operation == "append":
        journal.append(RUN, entry(2, "new"), lease)
    elif operation == "put_meta":
        journal.put_meta(dict(NEW_META), lease)
    elif operation == "delete":
        journal.delete(RUN, lease)
    elif operation == "blob_put":
        blobs.put(REF, b"new", lease)
    elif operation == "blob_put_many" and has_batch_put(blobs):
        cast(BatchTranscriptStore, blobs).put_many(
            [(REF, b"new"), (BATCH_REF, b"new")], lease
        )
    elif operation == "blob_delete":
        blobs.delete(REF, lease)
    elif leases is not None and operation == "acquire":
        leases.acquire(RUN, f"kp-child-{os.getpid()}")
    elif leases is not None and lease is not None and operation == "renew":
        leases.renew(lease)
    elif leases is not None and lease is not None and operation == "release":
        leases.release(lease)
    else:
        raise ValueError(f"no operation {operation!r} on this store")


def _take_child_lease(opened: OpenedStore, operation: str) -> Lease | None:
    leases = leasable_of(opened)
    if leases is None or operation == "acquire":
        return None
    return leases.acquire(RUN, f"kp-child-{os.getpid()}")


def run_store_child(opener: LocationOpener, config: KillPointWorkerConfig) -> None:
    """The child of one store-level case: take the lease, arm, perform, die."""
    operation, point = config.scenario_id.split("@", 1)
    report = ReportWriter(config.report_path)
    # ttl 0: the store takes no ttl (it has no leases); open it with its defaults.
    with opener(config.ttl_ms or None, None, False) as opened:
        lease = _take_child_lease(opened, operation)
        if lease is not None:
            report.event(t="lease", epoch=lease.epoch, at_ms=system_clock_ms())
        if operation == "renew":
            time.sleep(RENEW_GAP_MS / 1000)

        def die_at(reached: str, where: str) -> None:
            if reached == operation and where == point:
                report.event(t="kill", point=point, site=operation)
                sigkill_self()

        report.event(t="armed", at_ms=system_clock_ms())
        set_failpoint_hook(die_at)
        _perform(opened, operation, lease)
        set_failpoint_hook(None)
        report.event(t="ran-to-completion", status="ok")


# -- setup, probe and the visible state -----------------------------------------


def prepare_run(opened: OpenedStore) -> list[int]:
    """Write the old state (two entries, meta, blob); return the epochs used."""
    leases = leasable_of(opened)
    lease = None if leases is None else leases.acquire(RUN, "kp-setup")
    opened.journal.append(RUN, entry(0, "old"), lease)
    opened.journal.append(RUN, entry(1, "old"), lease)
    opened.journal.put_meta(dict(OLD_META), lease)
    opened.transcripts.put(REF, b"old", lease)
    if leases is not None and lease is not None:
        leases.release(lease)
        return [lease.epoch]
    return []


def probe_points(location: StoreLocation, operation: str) -> frozenset[str] | None:
    """The failpoints ``operation`` passes on this store (``None``: no such operation).

    Runs the operation once in this process, at ``location``, with a hook that
    only records; removes the location afterwards.
    """
    reached: list[str] = []
    try:
        with location.open() as opened:
            if operation in LEASE_OPERATIONS and leasable_of(opened) is None:
                return None
            if operation == "blob_put_many" and not has_batch_put(opened.transcripts):
                return None
            prepare_run(opened)
            lease = _take_child_lease(opened, operation)
            previous = set_failpoint_hook(
                lambda op, point: reached.append(point) if op == operation else None
            )
            try:
                _perform(opened, operation, lease)
            finally:
                set_failpoint_hook(previous)
    finally:
        location.remove()
    return frozenset(reached)


State = dict[str, str]
"""A run as another handle sees it: part (journal, meta, blobs, lease) -> canonical JSON."""


def _state(journal: Any, meta: Any, blobs: Any) -> State:
    parts = {"journal": journal, "meta": meta, "blobs": blobs}
    return {name: stable_stringify(value) for name, value in parts.items()}


def visible_state(opened: OpenedStore) -> State:
    """Everything another handle can read of the run, part by part."""
    blobs = opened.transcripts
    return _state(
        opened.journal.load(RUN),
        read_run_meta(opened.journal, RUN),
        {ref: (blobs.get(ref) or b"").hex() for ref in blobs.list_refs(RUN)},
    )


def expected_states(operation: str) -> tuple[State, State]:
    """The visible state before and after the operation (old, new)."""
    journal = [entry(0, "old"), entry(1, "old")]
    meta: dict[str, Any] | None = dict(OLD_META)
    blobs = {REF: b"old".hex()}
    old = _state(journal, meta, blobs)
    if operation == "append":
        journal = [*journal, entry(2, "new")]
    elif operation == "put_meta":
        meta = dict(NEW_META)
    elif operation == "delete":
        journal, meta = [], None
    elif operation == "blob_put":
        blobs = {REF: b"new".hex()}
    elif operation == "blob_put_many":
        blobs = {REF: b"new".hex(), BATCH_REF: b"new".hex()}
    elif operation == "blob_delete":
        blobs = {}
    return old, _state(journal, meta, blobs)


def describe(seen: State, old: State, new: State) -> str:
    """Say, part by part, whether ``seen`` holds the old value, the new one or neither."""
    words = []
    for part, value in seen.items():
        if old.get(part) == new.get(part) == value:
            words.append(f"{part} unchanged")
        elif value == old.get(part):
            words.append(f"{part} old")
        elif value == new.get(part):
            words.append(f"{part} new")
        else:
            words.append(f"{part} neither old nor new: {value}")
    return "; ".join(words)


def lease_before_after(operation: str) -> tuple[str, str]:
    """Whether the run's lease is held at the probe time, before and after."""
    return {
        "acquire": ("free", "held"),
        "renew": ("free", "held"),  # probed after the old expiry, before the new
        "release": ("held", "free"),
        "delete": ("held", "free"),  # a leased delete removes the lease row (M6)
    }.get(operation, ("held", "held"))
