"""Store-level kill points: SIGKILL inside one store operation at one failpoint.

For a case ``(operation, point)`` the referee prepares a run at a fresh location
(two entries, a meta, a blob), then a child process opens the location itself,
takes the run's lease (leasable stores, except for ``acquire``), arms a
failpoint hook (``rulvar_store._failpoints``) and performs the operation; the
hook SIGKILLs the child when the operation reaches the point. The referee then
opens the location again and decides all-or-nothing over everything another
handle can observe, the lease included:

- before the commit (``after-begin``, ``after-fence-check``, ``before-commit``)
  nothing of the operation is visible;
- at ``after-commit`` and ``after-rename`` all of it is;
- at the in-between points (``after-send``: the COMMIT is on its way and the
  server decides; the file store's ``mid-write``, ``after-write``,
  ``after-fsync``) exactly the old state or exactly the new one, never a mix
  (a torn journal line counts as old once ``load`` repaired it).

Then the store must be fully usable: a takeover acquire succeeds once the dead
child's lease is past its ttl (the referee's clock is moved there, never
slept), its epoch is above every epoch seen before, and a leased append, meta
write and blob write from the fresh handle succeed.

Which points an operation's path has is learned once per operation by running it
in-process with a recording hook; a point the store never reaches is reported
not run, with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rulvar_conformance._kit import not_run, require
from rulvar_conformance.kill_points.referee import SkewedClock, spawn_worker
from rulvar_conformance.kill_points.worker import (
    KillPointWorkerConfig,
    ReportWriter,
    encode_opener,
    sigkill_self,
)
from rulvar_store import (
    LeasableStore,
    Lease,
    LeaseHeldError,
    OpenedStore,
    read_run_meta,
    stable_stringify,
    system_clock_ms,
)
from rulvar_store._failpoints import set_failpoint_hook
from rulvar_store._locations import LocationOpener, StoreLocation

__all__ = [
    "ALL_POINTS",
    "EITHER_POINTS",
    "NOTHING_POINTS",
    "OPERATIONS",
    "STORE_CASES",
    "StoreCase",
    "probe_points",
    "run_store_case",
    "run_store_child",
]

RUN: Final = "kp-store"
REF: Final = f"{RUN}/ckpt/1"
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
"""Every operation at every failpoint any reference store has (49 cases)."""

OLD_META: Final = {"runId": RUN, "status": "running", "updatedAt": "t0", "mark": "old"}
NEW_META: Final = {"runId": RUN, "status": "ok", "updatedAt": "t1", "mark": "new"}


def _entry(seq: int, mark: str) -> dict[str, Any]:
    return {"hashVersion": 2, "seq": seq, "kind": "step", "status": "ok", "mark": mark}


# -- the operation, as both the probe and the child perform it -----------------


def _leasable(opened: OpenedStore) -> LeasableStore | None:
    journal = opened.journal
    return journal if isinstance(journal, LeasableStore) else None


def _perform(opened: OpenedStore, operation: str, lease: Lease | None) -> None:
    journal, blobs = opened.journal, opened.transcripts
    leases = _leasable(opened)
    if operation == "append":
        journal.append(RUN, _entry(2, "new"), lease)
    elif operation == "put_meta":
        journal.put_meta(dict(NEW_META), lease)
    elif operation == "delete":
        journal.delete(RUN, lease)
    elif operation == "blob_put":
        blobs.put(REF, b"new", lease)
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
    leases = _leasable(opened)
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


def _prepare(opened: OpenedStore) -> list[int]:
    """Write the old state (two entries, meta, blob); return the epochs used."""
    leases = _leasable(opened)
    lease = None if leases is None else leases.acquire(RUN, "kp-setup")
    opened.journal.append(RUN, _entry(0, "old"), lease)
    opened.journal.append(RUN, _entry(1, "old"), lease)
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
            if operation in LEASE_OPERATIONS and _leasable(opened) is None:
                return None
            _prepare(opened)
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


def _visible(opened: OpenedStore) -> str:
    """Everything another handle can read of the run, as one canonical text."""
    blobs = opened.transcripts
    return stable_stringify(
        {
            "journal": opened.journal.load(RUN),
            "meta": read_run_meta(opened.journal, RUN),
            "blobs": {
                ref: (blobs.get(ref) or b"").hex() for ref in blobs.list_refs(RUN)
            },
        }
    )


def _expected(operation: str) -> tuple[str, str]:
    """The visible state before and after the operation (old, new)."""
    journal = [_entry(0, "old"), _entry(1, "old")]
    meta: dict[str, Any] | None = dict(OLD_META)
    blobs = {REF: b"old".hex()}
    old = stable_stringify({"journal": journal, "meta": meta, "blobs": blobs})
    if operation == "append":
        journal = [*journal, _entry(2, "new")]
    elif operation == "put_meta":
        meta = dict(NEW_META)
    elif operation == "delete":
        journal, meta = [], None
    elif operation == "blob_put":
        blobs = {REF: b"new".hex()}
    elif operation == "blob_delete":
        blobs = {}
    return old, stable_stringify({"journal": journal, "meta": meta, "blobs": blobs})


def _lease_before_after(operation: str) -> tuple[str, str]:
    """Whether the run's lease is held at the probe time, before and after."""
    return {
        "acquire": ("free", "held"),
        "renew": ("free", "held"),  # probed after the old expiry, before the new
        "release": ("held", "free"),
        "delete": ("held", "free"),  # a leased delete removes the lease row (M6)
    }.get(operation, ("held", "held"))


# -- the referee ----------------------------------------------------------------


@dataclass
class _LeaseProbe:
    state: str = "none"
    lease: Lease | None = None
    epochs: tuple[int, ...] = ()


def _probe_lease(
    store: LeasableStore, clock: SkewedClock, events: list[dict[str, Any]], op: str
) -> _LeaseProbe:
    """Try a takeover at the probe time; serializes behind a dead transaction."""
    if op == "renew":
        lease_at = int(next(e["at_ms"] for e in events if e.get("t") == "lease"))
        armed_at = int(next(e["at_ms"] for e in events if e.get("t") == "armed"))
        probe_at = lease_at + CHILD_TTL_MS + (armed_at - lease_at) // 2
        clock.offset_ms = probe_at - system_clock_ms()
    try:
        lease = store.acquire(RUN, "kp-referee")
    except LeaseHeldError as exc:
        epoch = getattr(exc, "epoch", None)
        return _LeaseProbe("held", None, (epoch,) if isinstance(epoch, int) else ())
    return _LeaseProbe("free", lease, ())


def _child_problems(
    case: StoreCase, events: list[dict[str, Any]], code: int | None
) -> str:
    kills = [e for e in events if e.get("t") == "kill"]
    if code == -9 and len(kills) == 1:
        return ""
    fatal = [str(e.get("message")) for e in events if e.get("t") == "fatal"]
    finished = any(e.get("t") == "ran-to-completion" for e in events)
    how = "ran to completion" if finished else f"fatal: {fatal}" if fatal else ""
    return (
        f"the child did not die by SIGKILL at {case.operation}/{case.point} "
        f"(exit {code}, {len(kills)} kill events{', ' + how if how else ''})"
    )


def run_store_case(location: StoreLocation, case: StoreCase, workdir: Path) -> None:
    """Kill a child inside ``case.operation`` at ``case.point`` and referee the result."""
    setup_handle = location.open()
    try:
        leasable = _leasable(setup_handle) is not None
        if leasable and not location.clock:
            not_run(
                "the referee moves an injected clock past the dead child's lease; "
                f"location {location.name!r} takes no clock (now=)"
            )
        epochs = _prepare(setup_handle)
        old, new = _expected(case.operation)
        require(_visible(setup_handle) == old, "the prepared state does not read back")
    finally:
        setup_handle.close()
    report = workdir / f"kill-report-{case.id}.jsonl"
    config = KillPointWorkerConfig(
        store_path=location.name,
        run_id=RUN,
        ttl_ms=CHILD_TTL_MS if leasable else 0,
        report_path=str(report),
        scenario_id=f"{case.operation}@{case.point}",
        opener=encode_opener(location.opener),
        mode="store",
    )
    child = spawn_worker(config)
    problem = _child_problems(case, child.events, child.returncode)
    require(not problem, f"{problem}; stderr: {child.stderr.strip() or '(empty)'}")
    epochs += [int(e["epoch"]) for e in child.events if e.get("t") == "lease"]
    clock = SkewedClock()
    with location.open(now=clock if leasable else None) as opened:
        _referee(opened, case, clock, child.events, epochs, (old, new))


def _referee(
    opened: OpenedStore,
    case: StoreCase,
    clock: SkewedClock,
    events: list[dict[str, Any]],
    epochs: list[int],
    states: tuple[str, str],
) -> None:
    store = _leasable(opened)
    probe = _LeaseProbe()
    if store is not None:
        probe = _probe_lease(store, clock, events, case.operation)
    seen = (_visible(opened), probe.state)
    lease_old, lease_new = (
        _lease_before_after(case.operation) if store is not None else ("none", "none")
    )
    before, after = (states[0], lease_old), (states[1], lease_new)
    if case.point in NOTHING_POINTS:
        allowed = [before]
    elif case.point in ALL_POINTS:
        allowed = [after]
    else:
        allowed = [before, after]
    require(
        seen in allowed,
        f"death at {case.operation}/{case.point} left a state that is "
        f"{'neither the old nor the new one' if len(allowed) == 2 else 'not the expected one'}: "
        f"lease {seen[1]} (old {lease_old}, new {lease_new}); visible {seen[0]} "
        f"(old {states[0]}; new {states[1]})",
    )
    _check_usable(opened, store, clock, probe, epochs + list(probe.epochs))


def _check_usable(
    opened: OpenedStore,
    store: LeasableStore | None,
    clock: SkewedClock,
    probe: _LeaseProbe,
    epochs: list[int],
) -> None:
    """A takeover past one ttl succeeds with a higher epoch; writes then succeed."""
    lease = probe.lease
    if store is not None and lease is None:
        clock.offset_ms = CHILD_TTL_MS + RENEW_GAP_MS + 1_000
        try:
            lease = store.acquire(RUN, "kp-referee")
        except LeaseHeldError as exc:
            raise AssertionError(
                f"a lease row still blocks a takeover one ttl after the death: {exc}"
            ) from exc
    if lease is not None:
        require(
            all(lease.epoch > epoch for epoch in epochs),
            f"the takeover epoch {lease.epoch} is not above every earlier epoch {epochs}",
        )
    tail = [e.get("seq") for e in opened.journal.load(RUN)]
    seq = max((s for s in tail if isinstance(s, int)), default=-1) + 1
    attempts: list[tuple[str, Callable[[], object]]] = [
        ("append", lambda: opened.journal.append(RUN, _entry(seq, "after"), lease)),
        (
            "put_meta",
            lambda: opened.journal.put_meta({**OLD_META, "mark": "after"}, lease),
        ),
        ("blob put", lambda: opened.transcripts.put(f"{RUN}/after", b"after", lease)),
    ]
    for name, call in attempts:
        try:
            call()
        except Exception as exc:
            raise AssertionError(
                f"the store is not usable after the death: {name} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    require(
        opened.journal.load(RUN)[-1] == _entry(seq, "after"),
        "the append after the death is not the journal's last entry",
    )
    if store is not None and lease is not None:
        store.release(lease)


def ensure_point(points: frozenset[str] | None, case: StoreCase) -> None:
    """Stop the check as not run when the store has no such operation or point."""
    if points is None:
        not_run(f"the store has no {case.operation} (it declares no leases)")
    elif case.point not in points:
        reached = ", ".join(sorted(points)) or "none"
        not_run(
            f"the store's {case.operation} path has no failpoint {case.point!r} "
            f"(it has: {reached})"
        )
