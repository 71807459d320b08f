"""``stale_surfaces_conformance(certification)``: a lease that is not live, on every surface.

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

from rulvar_conformance.harness.certification import Certification, SuiteSpec
from rulvar_conformance.harness.kit import (
    ConformanceCheck,
    ConformanceSuite,
    attempt,
    build_check,
    not_run,
    require,
)
from rulvar_conformance.harness.probe import (
    describe,
    expect_lease_held,
    expect_ok,
    fenced_blobs,
    fenced_journal,
    snapshot,
)
from rulvar_conformance.harness.site import ManualClock, at_fresh_location
from rulvar_conformance.suites._stale_states import (
    CLOCK_TTL_MS,
    EXPIRED_STATES,
    LONG_TTL_MS,
    STALE_STATES,
    STATE_WORDS,
    Stage,
    Staged,
    blob_ref,
    leasable_journal,
    open_stage,
    seed,
    seed_unleased,
    stage_run,
    stale_meta,
    verify_untouched,
)
from rulvar_conformance.suites.journal import conf_entry
from rulvar_store import JournalOrderViolation, Lease, OpenedStore
from rulvar_store.backend import LocationFactory

__all__ = ["SPEC", "STALE_STATES", "stale_surfaces_conformance"]

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


SURFACES: Final = {
    "append": Surface(
        "append",
        "append",
        None,
        lambda o, run, lease: leasable_journal(o).append(run, conf_entry(50), lease),
    ),
    "put-meta": Surface(
        "put-meta",
        "put_meta",
        "fenced_writes",
        lambda o, run, lease: leasable_journal(o).put_meta(stale_meta(run), lease),
    ),
    "delete": Surface(
        "delete", "delete", "fenced_writes", lambda o, run, lease: leasable_journal(o).delete(run, lease)
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
        "renew", "renew", None, lambda o, run, lease: leasable_journal(o).renew(lease)
    ),
    "release": Surface(
        "release", "release", None, lambda o, run, lease: leasable_journal(o).release(lease)
    ),
}  # fmt: skip


def _attack(stage: Stage, surface: Surface, staged: Staged) -> None:
    """Try ``surface`` with the dead lease; require refusal and no visible change."""
    what = f"{surface.label} with {STATE_WORDS[staged.state]}"
    refs = (blob_ref(staged.run),)
    before = snapshot(stage.other, staged.run, refs)
    outcome = attempt(lambda: surface.call(stage.writer, staged.run, staged.stale))
    expect_lease_held(outcome, what)
    before.require_same(snapshot(stage.other, staged.run, refs), what)
    verify_untouched(stage, staged, what)


def _surface_states(locations: LocationFactory, surface: Surface) -> None:
    with at_fresh_location(locations) as site:
        stage = open_stage(site, None, LONG_TTL_MS)
        if not surface.offered_by(stage.writer):
            not_run(
                f"the store does not declare {surface.needs} (no fenced {surface.label})"
            )
        for state in STALE_STATES:
            _attack(stage, surface, stage_run(stage, state, f"{surface.tag}-{state}"))


def _expired_every_surface(locations: LocationFactory) -> None:
    with at_fresh_location(locations, needs=("clock",)) as site:
        stage = open_stage(site, ManualClock(), CLOCK_TTL_MS)
        for surface in SURFACES.values():
            if not surface.offered_by(stage.writer):
                continue
            for state in EXPIRED_STATES:
                staged = stage_run(stage, state, f"{surface.tag}-{state}")
                _attack(stage, surface, staged)


# -- run match (F2) --------------------------------------------------------------

LEASED_RUN: Final = "xrun"
FOREIGN_RUNS: Final = ("xrun-2", "xru", "xrun.b", "xrun-free")


def _cross_run(locations: LocationFactory) -> None:
    with at_fresh_location(locations) as site:
        stage = open_stage(site, None, LONG_TTL_MS)
        writer, other = leasable_journal(stage.writer), leasable_journal(stage.other)
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
                    seed_unleased(stage, run)
                    holder = None
                else:
                    holder = other.acquire(run, "same-owner")
                    seed(stage, stage.other, run, 10, holder)
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
                    verify_untouched(stage, staged, what)
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
        stage = open_stage(site, None, LONG_TTL_MS)
        writer = leasable_journal(stage.writer)
        foreign = writer.acquire("j7-foreign", "writer-a")
        for state in J7_STATES:
            run = f"j7-{state}"
            if state == "cross-run":
                staged = stage_run(stage, "superseded", run)
                staged = Staged(state, run, foreign, staged.holder, staged.issued)
            else:
                staged = stage_run(stage, state, run)
            tail = max(
                entry["seq"] for entry in leasable_journal(stage.other).load(run)
            )
            for seq in (0, tail):
                what = (
                    f"append of seq {seq} (not above the tail {tail}) with "
                    f"{STATE_WORDS.get(state, 'the live lease of another run')}"
                )
                before = snapshot(stage.other, run)
                outcome = attempt(
                    partial(writer.append, run, conf_entry(seq), staged.stale)
                )
                require(
                    not isinstance(outcome.error, JournalOrderViolation),
                    f"{what}: expected LeaseHeldError (J7: run match, then fence, then "
                    f"seq guard), observed {describe(outcome.error)}",
                )
                expect_lease_held(outcome, what)
                before.require_same(snapshot(stage.other, run), what)


def stale_surfaces_conformance(certification: Certification) -> ConformanceSuite:
    """Build the stale-surfaces suite over fresh locations of a leasable store."""
    locations = certification.locations
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
            ("renew", SURFACES["renew"], ("L6", "F3")),
            ("release", SURFACES["release"], ("L6", "F3", "X3")),
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


SPEC: Final = SuiteSpec(
    "stale-surfaces",
    stale_surfaces_conformance,
    "leases",
    True,
    "a dead lease of every kind on every surface (L6, F2, F6, J7)",
)
