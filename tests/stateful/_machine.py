"""A model-based test of any fenced store: two handles on one location vs. a dict model.

Reusable by every backend. A backend test supplies an opener::

    def open_pair(now: Callable[[], int], ttl_ms: int) -> tuple[store_a, store_b, cleanup]

returning two independent handles (separate instances, connections or pools) on
ONE fresh location, both reading time from ``now`` (Unix ms, moved by the
machine), both with lease ttl ``ttl_ms``; ``cleanup()`` closes them and removes
the location. Each store must be a ``LeasableStore`` with ``get_meta`` and a
``transcripts()`` fenced twin. Then::

    TestMyStore = make_store_machine(open_pair).TestCase
    TestMyStore.settings = machine_settings()

The machine drives acquire/renew/release by three owners over two runs, appends
with fresh, stale, float and non-numeric seqs, put_meta, leased and unleased run
deletes, blob puts and deletes, with live, stale, released, foreign and forged
leases, and clock moves past the ttl. Every call goes to a randomly chosen handle
and to a plain dict model (written here, independent of ``MemoryStore``); results
and error types must agree, and after every step both handles must show the
model's journals, metas, run list and blobs.

Profiles: ``ci`` (100 examples x 30 steps, the default) and ``long`` (1,000 x 50):
``RULVAR_HYPOTHESIS_PROFILE=long`` or ``pytest tests/stateful --hypothesis-profile=long``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rulvar_store import (
    JournalOrderViolation,
    LeasableStore,
    Lease,
    LeaseHeldError,
    LeaseRunMismatchError,
    MetaLookupStore,
    RunFilter,
    TranscriptStore,
)

__all__ = [
    "SEQ_KINDS",
    "MachineStore",
    "OpenPair",
    "machine_settings",
    "make_store_machine",
]

RUNS = ("run-a", "run-b")
OWNERS = ("owner-1", "owner-2", "owner-3")
BLOB_NAMES = ("ckpt/1", "t0")
STATUSES = ("running", "suspended", "ok")
DEFAULT_TTL_MS = 100
START_MS = 1_700_000_000_000

settings.register_profile(
    "ci",
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "long",
    max_examples=1000,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def machine_settings() -> settings:
    """The profile named by ``RULVAR_HYPOTHESIS_PROFILE``, else the loaded one if ours,
    else ``ci``."""
    name = (
        os.environ.get("RULVAR_HYPOTHESIS_PROFILE")
        or settings.get_current_profile_name()
    )
    return settings.get_profile(name if name in ("ci", "long") else "ci")


class MachineStore(LeasableStore, MetaLookupStore, Protocol):
    """What the machine drives: leases, meta lookup and a fenced blob twin."""

    def transcripts(self) -> TranscriptStore: ...


OpenPair = Callable[
    [Callable[[], int], int], tuple[MachineStore, MachineStore, Callable[[], None]]
]


# -- the model ---------------------------------------------------------------------


@dataclass
class _LeaseRow:
    owner: str
    epoch: int
    expires_at: int


@dataclass
class Model:
    """The reference semantics in plain dicts (CONTRACT 2-5)."""

    ttl_ms: int
    now: int = START_MS
    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    metas: dict[str, dict[str, Any]] = field(default_factory=dict)
    leases: dict[str, _LeaseRow] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def _fence(self, lease: Lease | None, run_id: str) -> None:
        if lease is None:
            return
        if lease.run_id != run_id:  # F2
            raise LeaseRunMismatchError(
                "run mismatch"
            )  # a LeaseHeldError, not retryable
        row = self.leases.get(lease.run_id)
        if (
            row is None
            or row.expires_at <= self.now
            or (row.owner, row.epoch) != (lease.owner, lease.epoch)
        ):
            raise LeaseHeldError("not the live lease")

    def acquire(self, run_id: str, owner: str) -> Lease:
        row = self.leases.get(run_id)
        if row is not None and row.expires_at > self.now:
            raise LeaseHeldError("held")
        epoch = self.epochs.get(run_id, 0) + 1
        self.epochs[run_id] = epoch
        self.leases[run_id] = _LeaseRow(owner, epoch, self.now + self.ttl_ms)
        return Lease(run_id, owner, epoch)

    def renew(self, lease: Lease) -> None:
        self._fence(lease, lease.run_id)
        self.leases[lease.run_id].expires_at = self.now + self.ttl_ms

    def release(self, lease: Lease) -> None:
        self._fence(lease, lease.run_id)
        del self.leases[lease.run_id]

    def append(self, run_id: str, entry: dict[str, Any], lease: Lease | None) -> None:
        self._fence(lease, run_id)
        seq = _finite_seq(entry)
        journal = self.entries.setdefault(run_id, [])
        if seq is not None and any(
            (stored := _finite_seq(old)) is not None and stored >= seq
            for old in journal
        ):
            raise JournalOrderViolation("stale seq")
        journal.append(entry)

    def put_meta(self, meta: dict[str, Any], lease: Lease | None) -> None:
        self._fence(lease, meta["runId"])
        self.metas[meta["runId"]] = meta

    def delete(self, run_id: str, lease: Lease | None) -> None:
        self._fence(lease, run_id)
        self.entries.pop(run_id, None)
        self.metas.pop(run_id, None)
        self.leases.pop(run_id, None)

    def put_blob(self, ref: str, data: bytes, lease: Lease | None) -> None:
        self._fence(lease, ref.split("/", 1)[0])
        self.blobs[ref] = data

    def delete_blob(self, ref: str, lease: Lease | None) -> None:
        self._fence(lease, ref.split("/", 1)[0])
        self.blobs.pop(ref, None)

    def tail(self, run_id: str) -> float:
        seqs = [
            s for e in self.entries.get(run_id, []) if (s := _finite_seq(e)) is not None
        ]
        return max(seqs, default=-1)


def _finite_seq(entry: dict[str, Any]) -> float | None:
    seq = entry.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int | float):
        return None
    return seq if math.isfinite(seq) else None


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """('ok', result) or (error class name, None); other exceptions propagate."""
    try:
        return ("ok", call())
    except (LeaseHeldError, JournalOrderViolation) as exc:
        return (type(exc).__name__, None)


# -- the machine -------------------------------------------------------------------

handles = st.sampled_from((0, 1))
runs = st.sampled_from(RUNS)
owners = st.sampled_from(OWNERS)
# None = unleased; an int picks an issued lease (stale or live, the most telling
# case, hence drawn twice as often); a Lease is forged.
issued_picks = st.integers(min_value=0, max_value=1_000)
lease_picks = st.one_of(
    st.none(),
    issued_picks,
    issued_picks,
    st.builds(Lease, runs, owners, st.integers(min_value=0, max_value=6)),
)
SEQ_KINDS = ("next", "next", "gap", "same", "lower", "float", "none", "true")
seq_kinds = st.sampled_from(SEQ_KINDS)


def make_store_machine(
    open_pair: OpenPair,
    *,
    ttl_ms: int = DEFAULT_TTL_MS,
    seq_kinds: Sequence[str] = SEQ_KINDS,
) -> type[RuleBasedStateMachine]:
    """Return a state machine class driving ``open_pair``'s two handles (module doc).

    ``seq_kinds`` narrows the appended seqs for a format that cannot hold some
    (e.g. without ``"true"`` where the seq index refuses a boolean).
    """
    kinds = st.sampled_from(tuple(seq_kinds))

    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = Model(ttl_ms=ttl_ms)
            self.issued: list[Lease] = []
            self.counter = 0
            a, b, self.cleanup = open_pair(lambda: self.model.now, ttl_ms)
            self.stores = (a, b)

        def teardown(self) -> None:
            self.cleanup()

        def _lease(self, pick: int | Lease | None) -> Lease | None:
            if isinstance(pick, int):
                # Most recent leases first: they are the live ones worth fencing.
                return (
                    self.issued[-1 - pick % len(self.issued)] if self.issued else None
                )
            return pick

        def _same(
            self, store_call: Callable[[], Any], model_call: Callable[[], Any]
        ) -> Any:
            expected = _outcome(model_call)
            got = _outcome(store_call)
            assert got == expected, f"store {got} != model {expected}"
            return got[1]

        # -- leases --

        @rule(handle=handles, run_id=runs, owner=owners)
        def acquire(self, handle: int, run_id: str, owner: str) -> None:
            lease = self._same(
                lambda: self.stores[handle].acquire(run_id, owner),
                lambda: self.model.acquire(run_id, owner),
            )
            if lease is not None:
                self.issued.append(lease)

        @rule(handle=handles, pick=lease_picks)
        def renew(self, handle: int, pick: int | Lease | None) -> None:
            lease = self._lease(pick) or Lease(RUNS[0], OWNERS[0], 1)
            self._same(
                lambda: self.stores[handle].renew(lease),
                lambda: self.model.renew(lease),
            )

        @rule(handle=handles, pick=lease_picks)
        def release(self, handle: int, pick: int | Lease | None) -> None:
            lease = self._lease(pick) or Lease(RUNS[0], OWNERS[0], 1)
            self._same(
                lambda: self.stores[handle].release(lease),
                lambda: self.model.release(lease),
            )

        @rule(
            delta_ms=st.sampled_from((1, ttl_ms // 3, ttl_ms - 1, ttl_ms, ttl_ms + 50))
        )
        def advance_clock(self, delta_ms: int) -> None:
            self.model.now += max(1, delta_ms)

        # -- journal and meta --

        @rule(handle=handles, run_id=runs, kind=kinds, pick=lease_picks)
        def append(
            self, handle: int, run_id: str, kind: str, pick: int | Lease | None
        ) -> None:
            lease = self._lease(pick)
            tail = self.model.tail(run_id)
            self.counter += 1
            entry: dict[str, Any] = {"kind": "step", "n": self.counter, "note": "δ"}
            seqs: dict[str, Any] = {
                "next": math.floor(tail) + 1,
                "gap": math.floor(tail) + 3,
                "same": tail,
                "lower": tail - 1,
                "float": tail + 0.5,
                "true": True,
            }
            if kind in seqs:
                entry["seq"] = seqs[kind]
            self._same(
                lambda: self.stores[handle].append(run_id, dict(entry), lease),
                lambda: self.model.append(run_id, dict(entry), lease),
            )

        @rule(
            handle=handles,
            run_id=runs,
            status=st.sampled_from(STATUSES),
            pick=lease_picks,
        )
        def put_meta(
            self, handle: int, run_id: str, status: str, pick: int | Lease | None
        ) -> None:
            lease = self._lease(pick)
            self.counter += 1
            meta: dict[str, Any] = {
                "runId": run_id,
                "status": status,
                "updatedAt": f"t{self.counter}",
            }
            if self.counter % 2:
                meta["name"] = "wf"
                meta["tags"] = ["x"]
            self._same(
                lambda: self.stores[handle].put_meta(dict(meta), lease),
                lambda: self.model.put_meta(dict(meta), lease),
            )

        @rule(handle=handles, run_id=runs, pick=lease_picks)
        def delete(self, handle: int, run_id: str, pick: int | Lease | None) -> None:
            lease = self._lease(pick)
            self._same(
                lambda: self.stores[handle].delete(run_id, lease),
                lambda: self.model.delete(run_id, lease),
            )

        # -- blobs --

        @rule(
            handle=handles,
            run_id=runs,
            name=st.sampled_from(BLOB_NAMES),
            data=st.binary(max_size=8),
            pick=lease_picks,
        )
        def put_blob(
            self,
            handle: int,
            run_id: str,
            name: str,
            data: bytes,
            pick: int | Lease | None,
        ) -> None:
            lease, ref = self._lease(pick), f"{run_id}/{name}"
            self._same(
                lambda: self.stores[handle].transcripts().put(ref, data, lease),
                lambda: self.model.put_blob(ref, data, lease),
            )

        @rule(
            handle=handles,
            run_id=runs,
            name=st.sampled_from(BLOB_NAMES),
            pick=lease_picks,
        )
        def delete_blob(
            self, handle: int, run_id: str, name: str, pick: int | Lease | None
        ) -> None:
            lease, ref = self._lease(pick), f"{run_id}/{name}"
            self._same(
                lambda: self.stores[handle].transcripts().delete(ref, lease),
                lambda: self.model.delete_blob(ref, lease),
            )

        # -- state --

        @invariant()
        def both_handles_show_the_model_state(self) -> None:
            model = self.model
            metas = [model.metas[run] for run in sorted(model.metas)]
            running = [m for m in metas if m["status"] in ("running", "suspended")]
            for store in self.stores:
                blobs = store.transcripts()
                for run in RUNS:
                    assert store.load(run) == model.entries.get(run, []), run
                    assert store.get_meta(run) == model.metas.get(run), run
                    refs = sorted(r for r in model.blobs if r.startswith(run + "/"))
                    assert blobs.list_refs(run) == refs, run
                    for ref in refs:
                        assert blobs.get(ref) == model.blobs[ref], ref
                assert store.list_runs() == metas
                by_status = store.list_runs(
                    RunFilter(statuses=["running", "suspended"])
                )
                assert by_status == running

    return StoreMachine
