"""``stale_surfaces_conformance(locations)``: a lease that is not live, on every surface.

A lease can be dead in many ways: released, superseded by a successor, expired
and left, expired and taken over, never issued (a future epoch), issued to
someone else (right epoch, wrong owner), or issued for another run (F2). Each
way meets each lease-carrying surface (append, put_meta, delete, blob put, blob
delete, renew, release), on runs that hold data and on runs that hold nothing
yet (F6: a superseded segment's FIRST write must be refused and create
nothing). Every refusal must be ``LeaseHeldError`` (L6), and afterwards nothing
any handle can observe has changed (F3): journal, meta, listing, blobs, and the
successor's lease row (it still renews and writes; a third owner still cannot
acquire). Where the location is shared, the successor acts and observes through
a second handle, as another process would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Final

from rulvar_conformance._kit import (
    ConformanceCheck,
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance._probe import (
    describe,
    expect_lease_held,
    expect_ok,
    fenced_blobs,
    fenced_journal,
    future_lease,
    is_leasable,
    snapshot,
)
from rulvar_conformance._site import ManualClock, Site, at_fresh_location
from rulvar_conformance.journal import conf_entry
from rulvar_store import (
    JournalOrderViolation,
    LeasableStore,
    Lease,
    OpenedStore,
    RunMeta,
)
from rulvar_store._locations import LocationFactory

__all__ = ["STALE_STATES", "stale_surfaces_conformance"]

LONG_TTL_MS: Final = 600_000
"""ttl of the no-clock checks: no stall can expire a lease inside them."""

CLOCK_TTL_MS: Final = 1_000
"""ttl of the clock checks; time moves only when the check moves it."""

SUCCESSOR_SEQ: Final = 100
"""The successor's proof-of-life append, above every seeded seq."""

STALE_STATES: Final = (
    "released",
    "released-empty",
    "never-leased",
    "superseded",
    "superseded-empty",
    "future-epoch",
    "future-epoch-free",
    "stranger",
)
"""Ways a lease is dead without any clock, in the order each check tries them."""

EXPIRED_STATES: Final = ("expired", "expired-empty", "expired-taken")
"""Ways a lease is dead once the injected clock has passed its expiry."""

_STATE_WORDS: Final = {
    "released": "a released lease (run holds data)",
    "released-empty": "a released lease (run holds nothing yet)",
    "never-leased": "a lease never issued (run never leased)",
    "superseded": "a superseded lease (successor live, run holds data)",
    "superseded-empty": "a superseded lease (successor live, run holds nothing yet)",
    "future-epoch": "a never-issued future epoch of the live holder",
    "future-epoch-free": "a never-issued future epoch on a free run",
    "stranger": "a lease with the live epoch but another owner",
    "expired": "an expired lease not taken over (run holds data)",
    "expired-empty": "an expired lease not taken over (run holds nothing yet)",
    "expired-taken": "an expired lease taken over by a successor",
}


def blob_ref(run_id: str) -> str:
    """The blob the suite seeds and attacks for ``run_id``."""
    return f"{run_id}/ckpt/7"


def stale_meta(run_id: str) -> RunMeta:
    """What a superseded segment would write: a terminal status."""
    return {"runId": run_id, "status": "cancelled", "segments": 1, "updatedAt": "stale"}


@dataclass
class Stage:
    """The handles of one check: ``writer`` goes stale, ``other`` succeeds and observes."""

    writer: OpenedStore
    other: OpenedStore
    clock: ManualClock | None
    ttl_ms: int

    def journal(self, opened: OpenedStore) -> LeasableStore:
        journal = opened.journal
        assert isinstance(journal, LeasableStore)
        return journal


@dataclass(frozen=True)
class Staged:
    """One run in one dead-lease state."""

    state: str
    run: str
    stale: Lease
    holder: Lease | None
    issued: int  # the highest epoch the run has been issued
    holder_expires: int | None = None  # clock ms, clock checks only


def _open_stage(site: Site, clock: ManualClock | None, ttl_ms: int) -> Stage:
    writer = site.open(ttl_ms, now=clock)
    if not is_leasable(writer):
        not_run("needs a leasable journal store (acquire, renew, release)")
    other = site.open(ttl_ms, now=clock) if site.location.shared else writer
    return Stage(writer, other, clock, ttl_ms)


def _seed(stage: Stage, opened: OpenedStore, run: str, base: int, lease: Lease) -> None:
    """Give ``run`` two entries, a meta and a blob, each under ``lease`` where fenced."""
    journal = stage.journal(opened)
    journal.append(run, conf_entry(base), lease)
    journal.append(run, conf_entry(base + 1), lease)
    meta = {"runId": run, "status": "running", "segments": base + 1, "updatedAt": "s"}
    journal.put_meta(meta, lease if fenced_journal(opened) else None)
    opened.transcripts.put(
        blob_ref(run), bytes([base, 1, 2]), lease if fenced_blobs(opened) else None
    )


def _stage_run(stage: Stage, state: str, run: str) -> Staged:
    """Bring ``run`` into ``state`` and return the dead lease and the live holder."""
    writer, other = stage.journal(stage.writer), stage.journal(stage.other)
    if state == "never-leased":
        _seed_unleased(stage, run)
        return Staged(state, run, Lease(run, "ghost", 1), None, 0)
    if state in ("future-epoch", "stranger"):
        holder = other.acquire(run, "writer-b")
        _seed(stage, stage.other, run, 10, holder)
        stale = (
            future_lease(holder)
            if state == "future-epoch"
            else Lease(run, "stranger", holder.epoch)
        )
        return Staged(state, run, stale, holder, holder.epoch)
    first = writer.acquire(run, "writer-a")
    if not state.endswith("-empty"):
        _seed(stage, stage.writer, run, 0, first)
    if state.startswith("expired"):
        assert stage.clock is not None
        stage.clock.advance(stage.ttl_ms)
    else:
        writer.release(first)
    if state == "future-epoch-free":
        return Staged(state, run, future_lease(first), None, first.epoch)
    if state in ("released", "released-empty", "expired", "expired-empty"):
        return Staged(state, run, first, None, first.epoch)
    holder = other.acquire(run, "writer-b")
    if state != "superseded-empty":
        _seed(stage, stage.other, run, 10, holder)
    expires = None if stage.clock is None else stage.clock() + stage.ttl_ms
    return Staged(state, run, first, holder, holder.epoch, expires)


def _seed_unleased(stage: Stage, run: str) -> None:
    journal = stage.journal(stage.other)
    journal.append(run, conf_entry(0))
    journal.put_meta({"runId": run, "status": "running", "updatedAt": "s"})
    stage.other.transcripts.put(blob_ref(run), b"\x00\x01")


def _verify_untouched(stage: Stage, staged: Staged, what: str) -> None:
    """After a refusal: the successor still holds and writes, or the run is free."""
    other = stage.journal(stage.other)
    run, holder, clock = staged.run, staged.holder, stage.clock
    if holder is None:
        taken = attempt(lambda: other.acquire(run, "third-owner"))
        require(
            taken.ok and taken.value is not None,
            f"after {what}: expected a third owner to acquire the free run, "
            f"observed {describe(taken.error)} (the refused call left a live lease row)",
        )
        epoch = taken.value.epoch if taken.value is not None else 0
        require(
            epoch > staged.issued,
            f"after {what}: expected the third owner's epoch above {staged.issued}, "
            f"observed {epoch} (L3)",
        )
        return
    if clock is None:
        expect_ok(lambda: other.renew(holder), f"after {what}: the successor's renew")
    else:
        assert staged.holder_expires is not None
        clock.set(staged.holder_expires - 1)
    blocked = attempt(lambda: other.acquire(run, "third-owner"))
    expect_lease_held(
        blocked,
        f"after {what}: a third owner's acquire while the successor is live "
        "(the successor's lease row must be intact)",
    )
    expect_ok(
        lambda: other.append(run, conf_entry(SUCCESSOR_SEQ), holder),
        f"after {what}: the successor's append",
    )
    if clock is not None and staged.holder_expires is not None:
        clock.set(staged.holder_expires)
        taken = attempt(lambda: other.acquire(run, "third-owner"))
        require(
            taken.ok,
            f"after {what}: expected the successor's untouched lease to expire at "
            f"its own expiry and a third owner to acquire, observed "
            f"{describe(taken.error)} (the refused call extended the lease row)",
        )


# -- surfaces --------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """One lease-carrying call: ``call(opened, run, lease)``."""

    tag: str
    label: str
    needs: str | None  # None, "fenced_writes" or "fenced_transcripts"
    call: Callable[[OpenedStore, str, Lease], object]

    def offered_by(self, opened: OpenedStore) -> bool:
        if self.needs == "fenced_writes":
            return fenced_journal(opened)
        if self.needs == "fenced_transcripts":
            return fenced_blobs(opened)
        return True


def _journal(opened: OpenedStore) -> LeasableStore:
    journal = opened.journal
    assert isinstance(journal, LeasableStore)
    return journal


SURFACES: Final = {
    "append": Surface(
        "append",
        "append",
        None,
        lambda o, run, lease: _journal(o).append(run, conf_entry(50), lease),
    ),
    "put-meta": Surface(
        "put-meta",
        "put_meta",
        "fenced_writes",
        lambda o, run, lease: _journal(o).put_meta(stale_meta(run), lease),
    ),
    "delete": Surface(
        "delete", "delete", "fenced_writes", lambda o, run, lease: _journal(o).delete(run, lease)
    ),
    "blob-put": Surface(
        "blob-put",
        "blob put",
        "fenced_transcripts",
        lambda o, run, lease: o.transcripts.put(blob_ref(run), b"stale", lease),
    ),
    "blob-delete": Surface(
        "blob-delete",
        "blob delete",
        "fenced_transcripts",
        lambda o, run, lease: o.transcripts.delete(blob_ref(run), lease),
    ),
    "renew": Surface(
        "renew", "renew", None, lambda o, run, lease: _journal(o).renew(lease)
    ),
    "release": Surface(
        "release", "release", None, lambda o, run, lease: _journal(o).release(lease)
    ),
}  # fmt: skip


def _attack(stage: Stage, surface: Surface, staged: Staged) -> None:
    """Try ``surface`` with the dead lease; require refusal and no visible change."""
    what = f"{surface.label} with {_STATE_WORDS[staged.state]}"
    refs = (blob_ref(staged.run),)
    before = snapshot(stage.other, staged.run, refs)
    outcome = attempt(lambda: surface.call(stage.writer, staged.run, staged.stale))
    expect_lease_held(outcome, what)
    before.require_same(snapshot(stage.other, staged.run, refs), what)
    _verify_untouched(stage, staged, what)


def _surface_states(locations: LocationFactory, surface: Surface) -> None:
    with at_fresh_location(locations) as site:
        stage = _open_stage(site, None, LONG_TTL_MS)
        if not surface.offered_by(stage.writer):
            not_run(
                f"the store does not declare {surface.needs} (no fenced {surface.label})"
            )
        for state in STALE_STATES:
            _attack(stage, surface, _stage_run(stage, state, f"{surface.tag}-{state}"))


def _expired_every_surface(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("clock",)) as site:
        stage = _open_stage(site, ManualClock(), CLOCK_TTL_MS)
        for surface in SURFACES.values():
            if not surface.offered_by(stage.writer):
                continue
            for state in EXPIRED_STATES:
                staged = _stage_run(stage, state, f"{surface.tag}-{state}")
                _attack(stage, surface, staged)


# -- run match (F2) --------------------------------------------------------------

LEASED_RUN: Final = "xrun"
FOREIGN_RUNS: Final = ("xrun-2", "xru", "xrun.b", "xrun-free")


def _cross_run(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        stage = _open_stage(site, None, LONG_TTL_MS)
        writer, other = stage.journal(stage.writer), stage.journal(stage.other)
        # One owner string on every run, and equal epochs: a store that fences the
        # mutated run's row against the lease's owner and epoch, skipping the run
        # match, accepts the foreign call.
        mine = writer.acquire(LEASED_RUN, "same-owner")
        for surface in SURFACES.values():
            if surface.tag in ("renew", "release") or not surface.offered_by(
                stage.writer
            ):
                continue
            for foreign in FOREIGN_RUNS:
                run = f"{foreign}-{surface.tag}"
                if foreign.endswith("-free"):
                    _seed_unleased(stage, run)
                    holder = None
                else:
                    holder = other.acquire(run, "same-owner")
                    _seed(stage, stage.other, run, 10, holder)
                staged = Staged(
                    "cross", run, mine, holder, 0 if holder is None else holder.epoch
                )
                what = (
                    f"{surface.label} of run {run!r} with the live lease of run "
                    f"{LEASED_RUN!r}"
                )
                refs = (blob_ref(run),)
                before = snapshot(stage.other, run, refs)
                outcome = attempt(partial(surface.call, stage.writer, run, mine))
                expect_lease_held(outcome, what)
                before.require_same(snapshot(stage.other, run, refs), what)
                if holder is not None:
                    _verify_untouched(stage, staged, what)
                expect_ok(
                    lambda: writer.renew(mine),
                    f"after {what}: the lease holder's renew of its own run",
                )
        expect_ok(
            lambda: writer.append(LEASED_RUN, conf_entry(0), mine),
            "the lease holder's append to its own run after the refused foreign calls",
        )


# -- J7: the fence answers before the seq guard ------------------------------------

J7_STATES: Final = ("released", "superseded", "future-epoch", "stranger", "cross-run")


def _lease_before_seq(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        stage = _open_stage(site, None, LONG_TTL_MS)
        writer = stage.journal(stage.writer)
        foreign = writer.acquire("j7-foreign", "writer-a")
        for state in J7_STATES:
            run = f"j7-{state}"
            if state == "cross-run":
                staged = _stage_run(stage, "superseded", run)
                staged = Staged(state, run, foreign, staged.holder, staged.issued)
            else:
                staged = _stage_run(stage, state, run)
            tail = max(entry["seq"] for entry in stage.journal(stage.other).load(run))
            for seq in (0, tail):
                what = (
                    f"append of seq {seq} (not above the tail {tail}) with "
                    f"{_STATE_WORDS.get(state, 'the live lease of another run')}"
                )
                before = snapshot(stage.other, run)
                outcome = attempt(
                    lambda: writer.append(run, conf_entry(seq), staged.stale)  # noqa: B023
                )
                require(
                    not isinstance(outcome.error, JournalOrderViolation),
                    f"{what}: expected LeaseHeldError (J7: run match, then fence, then "
                    f"seq guard), observed {describe(outcome.error)}",
                )
                expect_lease_held(outcome, what)
                before.require_same(snapshot(stage.other, run), what)


def stale_surfaces_conformance(locations: LocationFactory) -> ConformanceSuite:
    """Build the stale-surfaces suite over fresh locations of a leasable store."""
    table: list[tuple[str, str, tuple[str, ...], Callable[[], None]]] = [
        (f"stale-{tag}-refused",
         f"a dead lease's {surface.label} is refused and changes nothing, in every state",
         clauses, partial(_surface_states, locations, surface))
        for tag, surface, clauses in (
            ("append", SURFACES["append"], ("L6", "F3", "J7")),
            ("put-meta", SURFACES["put-meta"], ("F1", "F6", "L6", "F3", "X1")),
            ("delete", SURFACES["delete"], ("F1", "X4", "L6", "F3", "M6")),
            ("blob-put", SURFACES["blob-put"], ("T6", "F6", "L6", "F3", "X2")),
            ("blob-delete", SURFACES["blob-delete"], ("T6", "X4", "L6", "F3")),
            ("renew", SURFACES["renew"], ("L6", "Q8", "F3")),
            ("release", SURFACES["release"], ("L6", "Q8", "F3", "X3")),
        )
    ]  # fmt: skip
    table += [
        ("stale-expired-every-surface",
         "an expired lease, taken over or not, is refused everywhere and never resurrected",
         ("L6", "D8", "F3", "X3"), partial(_expired_every_surface, locations)),
        ("stale-cross-run-every-surface",
         "a live lease of one run is refused on every surface of another run",
         ("F2", "F3", "T3"), partial(_cross_run, locations)),
        ("stale-lease-before-seq-guard",
         "a dead lease with a stale seq raises LeaseHeldError, not JournalOrderViolation",
         ("J7", "L6", "F2"), partial(_lease_before_seq, locations)),
    ]  # fmt: skip
    checks: tuple[ConformanceCheck, ...] = tuple(
        build_check(check_id, title, clauses, body)
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("stale-surfaces", checks)
