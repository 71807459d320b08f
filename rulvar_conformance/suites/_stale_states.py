"""Dead-lease states for the stale-surfaces suite: how a run gets there, what must hold after.

``stage_run`` brings a fresh run into one way of having a dead lease (released,
superseded, expired, never issued, future epoch, another owner), with data or
with nothing written yet. ``verify_untouched`` then checks what a refused call
must have left alone: the successor's lease row (it still renews and writes, a
third owner still cannot acquire, and on a clock it expires exactly when it
would have), or a free run that a third owner can take with a higher epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rulvar_conformance.harness.kit import attempt, not_run, require
from rulvar_conformance.harness.probe import (
    describe,
    expect_lease_held,
    expect_ok,
    fenced_blobs,
    fenced_journal,
    future_lease,
    is_leasable,
)
from rulvar_conformance.harness.site import ManualClock, Site
from rulvar_conformance.suites.journal import conf_entry
from rulvar_store import LeasableStore, Lease, OpenedStore, RunMeta

__all__ = [
    "CLOCK_TTL_MS",
    "EXPIRED_STATES",
    "LONG_TTL_MS",
    "STALE_STATES",
    "STATE_WORDS",
    "Stage",
    "Staged",
    "blob_ref",
    "leasable_journal",
    "open_stage",
    "seed",
    "seed_unleased",
    "stage_run",
    "stale_meta",
    "verify_untouched",
]

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

STATE_WORDS: Final = {
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


def leasable_journal(opened: OpenedStore) -> LeasableStore:
    """The leasable journal of a handle (``_open_stage`` made sure it is one)."""
    journal = opened.journal
    assert isinstance(journal, LeasableStore)
    return journal


@dataclass
class Stage:
    """The handles of one check: ``writer`` goes stale, ``other`` succeeds and observes."""

    writer: OpenedStore
    other: OpenedStore
    clock: ManualClock | None
    ttl_ms: int


@dataclass(frozen=True)
class Staged:
    """One run in one dead-lease state."""

    state: str
    run: str
    stale: Lease
    holder: Lease | None
    issued: int  # the highest epoch the run has been issued
    holder_expires: int | None = None  # clock ms, clock checks only


def open_stage(site: Site, clock: ManualClock | None, ttl_ms: int) -> Stage:
    writer = site.open(ttl_ms, now=clock)
    if not is_leasable(writer):
        not_run("needs a leasable journal store (acquire, renew, release)")
    other = site.open(ttl_ms, now=clock) if site.location.shared else writer
    return Stage(writer, other, clock, ttl_ms)


def seed(stage: Stage, opened: OpenedStore, run: str, base: int, lease: Lease) -> None:
    """Give ``run`` two entries, a meta and a blob, each under ``lease`` where fenced."""
    journal = leasable_journal(opened)
    journal.append(run, conf_entry(base), lease)
    journal.append(run, conf_entry(base + 1), lease)
    meta = {"runId": run, "status": "running", "segments": base + 1, "updatedAt": "s"}
    journal.put_meta(meta, lease if fenced_journal(opened) else None)
    opened.transcripts.put(
        blob_ref(run), bytes([base, 1, 2]), lease if fenced_blobs(opened) else None
    )


def stage_run(stage: Stage, state: str, run: str) -> Staged:
    """Bring ``run`` into ``state`` and return the dead lease and the live holder."""
    writer, other = leasable_journal(stage.writer), leasable_journal(stage.other)
    if state == "never-leased":
        seed_unleased(stage, run)
        return Staged(state, run, Lease(run, "ghost", 1), None, 0)
    if state in ("future-epoch", "stranger"):
        holder = other.acquire(run, "writer-b")
        seed(stage, stage.other, run, 10, holder)
        stale = (
            future_lease(holder)
            if state == "future-epoch"
            else Lease(run, "stranger", holder.epoch)
        )
        return Staged(state, run, stale, holder, holder.epoch)
    first = writer.acquire(run, "writer-a")
    if not state.endswith("-empty"):
        seed(stage, stage.writer, run, 0, first)
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
        seed(stage, stage.other, run, 10, holder)
    expires = None if stage.clock is None else stage.clock() + stage.ttl_ms
    return Staged(state, run, first, holder, holder.epoch, expires)


def seed_unleased(stage: Stage, run: str) -> None:
    journal = leasable_journal(stage.other)
    journal.append(run, conf_entry(0))
    journal.put_meta({"runId": run, "status": "running", "updatedAt": "s"})
    stage.other.transcripts.put(blob_ref(run), b"\x00\x01")


def verify_untouched(stage: Stage, staged: Staged, what: str) -> None:
    """After a refusal: the successor still holds and writes, or the run is free."""
    other = leasable_journal(stage.other)
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
