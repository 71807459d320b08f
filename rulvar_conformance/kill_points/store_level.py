"""Store-level kill points: SIGKILL inside one store operation at one failpoint.

For a case ``(operation, point)`` the referee prepares a run at a fresh location
(two entries, a meta, a blob), then a child process opens the location itself,
takes the run's lease (leasable stores, except for ``acquire``), arms a
failpoint hook (``rulvar_store.backend``) and performs the operation; the
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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulvar_conformance.harness.kit import not_run, require
from rulvar_conformance.kill_points.child import (
    KillPointWorkerConfig,
    encode_opener,
)
from rulvar_conformance.kill_points.referee import SkewedClock
from rulvar_conformance.kill_points.spawn import WarmWorkers, spawn_worker
from rulvar_conformance.kill_points.store_ops import (
    ALL_POINTS,
    CHILD_TTL_MS,
    NOTHING_POINTS,
    OLD_META,
    RENEW_GAP_MS,
    RUN,
    State,
    StoreCase,
    describe,
    entry,
    expected_states,
    leasable_of,
    lease_before_after,
    prepare_run,
    visible_state,
)
from rulvar_store import LeasableStore, Lease, LeaseHeldError, OpenedStore
from rulvar_store.backend import StoreLocation, system_clock_ms
from rulvar_store.ops import has_lease_peek

__all__ = ["ensure_point", "run_store_case"]


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
    # A store that takes a dead holder's live lease over at once (L11) grants
    # this acquire although the dead child's lease row is live: the row, read
    # first at the same clock, still says the lease was held.
    live_row = _live_row(store, clock, events, op)
    try:
        lease = store.acquire(RUN, "kp-referee")
    except LeaseHeldError as exc:
        epoch = getattr(exc, "epoch", None)
        return _LeaseProbe("held", None, (epoch,) if isinstance(epoch, int) else ())
    return _LeaseProbe("held" if live_row else "free", lease, ())


def _live_row(
    store: LeasableStore, clock: SkewedClock, events: list[dict[str, Any]], op: str
) -> bool:
    """Whether the run's lease row is live at the probe time.

    Read with the store's lease peek; a store without one (an asyncio store
    seen through its sync bridge) is judged from the child's lease event, for
    the operations that leave the lease row as the child took it.
    """
    # An asyncio store seen through the kit's sync facade: its own sync store
    # (SQLite's, an adapter's) can still peek; the loop is idle by now.
    outer = getattr(store, "async_store", None)
    inner = getattr(outer, "sync_store", None)
    for peeker in (store, inner):
        if peeker is not None and has_lease_peek(peeker):
            row = peeker.peek_lease(RUN)
            return row is not None and row.live
    # One with no sync store but an async peek (PostgreSQL's): awaited on the
    # facade's loop. Without it the row was judged free and the referee's own
    # acquire, taking the dead child's lease over at once, read as "lease new".
    peek = getattr(outer, "peek_lease", None)
    loop = getattr(store, "loop", None)
    if callable(peek) and loop is not None:
        found = loop.call(lambda: peek(RUN))
        return found is not None and bool(found.live)
    if op in ("acquire", "renew", "release", "delete"):
        return False
    taken = [int(e["at_ms"]) for e in events if e.get("t") == "lease"]
    return bool(taken) and clock() < taken[-1] + CHILD_TTL_MS


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


def run_store_case(
    location: StoreLocation,
    case: StoreCase,
    workdir: Path,
    workers: WarmWorkers | None = None,
) -> None:
    """Kill a child inside ``case.operation`` at ``case.point`` and referee the result."""
    setup_handle = location.open()
    try:
        leasable = leasable_of(setup_handle) is not None
        if leasable and not location.clock:
            not_run(
                "the referee moves an injected clock past the dead child's lease; "
                f"location {location.name!r} takes no clock (now=)"
            )
        epochs = prepare_run(setup_handle)
        old, new = expected_states(case.operation)
        require(
            visible_state(setup_handle) == old, "the prepared state does not read back"
        )
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
    child = workers.run(config) if workers is not None else spawn_worker(config)
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
    states: tuple[State, State],
) -> None:
    store = leasable_of(opened)
    probe = _LeaseProbe()
    if store is not None:
        probe = _probe_lease(store, clock, events, case.operation)
    lease_old, lease_new = (
        lease_before_after(case.operation) if store is not None else ("none", "none")
    )
    seen = {**visible_state(opened), "lease": probe.state}
    before = {**states[0], "lease": lease_old}
    after = {**states[1], "lease": lease_new}
    if case.point in NOTHING_POINTS:
        allowed, wanted = [before], "nothing of the operation visible"
    elif case.point in ALL_POINTS:
        allowed, wanted = [after], "all of the operation visible"
    else:
        allowed, wanted = [before, after], "the old state or the new one, never a mix"
    require(
        seen in allowed,
        f"death at {case.operation}/{case.point} must leave {wanted}, but left: "
        + describe(seen, before, after),
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
        ("append", lambda: opened.journal.append(RUN, entry(seq, "after"), lease)),
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
        opened.journal.load(RUN)[-1] == entry(seq, "after"),
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
