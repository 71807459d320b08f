"""The journal suite: the JournalStore and meta obligations (CONTRACT 8.2).

Every check takes a fresh store (C1), works on run ``conformance-run`` and
disposes of the store afterwards: ``journal_suite(certification)`` opens each at
a fresh location, ``journal_store_conformance(mk)`` takes a plain factory. Concurrent checks run real threads released
together by a barrier, so appends and loads genuinely overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from itertools import pairwise
from typing import Any, Final

from rulvar_conformance.fold import fold_state, fold_state_sha256
from rulvar_conformance.golden import GOLDEN_FOLD_STATE_SHA256, golden_fold_journal
from rulvar_conformance.harness.certification import (
    Certification,
    SuiteSpec,
    fresh_journal,
)
from rulvar_conformance.harness.kit import (
    THREAD_TIMEOUT_S,
    ConformanceSuite,
    Fresh,
    Outcome,
    attempt,
    build_check,
    each_fresh,
    error_code,
    require,
    run_concurrently,
    same_json,
)
from rulvar_conformance.suites._journal_meta import meta_separation
from rulvar_conformance.suites._journal_oracles import (
    abandon_derived_skip,
    decide_once_oracle,
)
from rulvar_store import JournalEntry, JournalStore
from rulvar_store.backend import dump_record, stable_stringify

__all__ = [
    "SPEC",
    "conf_entry",
    "journal_store_conformance",
    "journal_suite",
    "seqs_of",
]

RUN: Final = "conformance-run"
ORDER_VIOLATION: Final = "journal_order_violation"

Mk = Callable[[], JournalStore]


def conf_entry(seq: int, **value: Any) -> JournalEntry:
    """The kit's standard entry (8.2); extra ``value`` keys tell racers apart."""
    return {
        "hashVersion": 2,
        "seq": seq,
        "scope": "",
        "key": f"conf-key-{seq}",
        "ordinal": 0,
        "kind": "step",
        "status": "ok",
        "value": {"seq": seq, **value},
        "spanId": "conf-span",
        "startedAt": f"2026-01-01T00:00:{seq % 60:02d}.000Z",
    }


def seqs_of(entries: Sequence[JournalEntry]) -> list[Any]:
    """Return the ``seq`` of each entry, in order."""
    return [entry.get("seq") for entry in entries]


def _strictly_increasing(values: Sequence[Any]) -> bool:
    return all(a < b for a, b in pairwise(values))


def _require_order_violation(outcome: Outcome[Any], what: str) -> None:
    require(
        error_code(outcome.error) == ORDER_VIOLATION,
        f"{what} raised {outcome.error!r}, expected code {ORDER_VIOLATION!r}",
    )


# -- a1 ------------------------------------------------------------------------

_FILLER: Final = "abcdefghijklmnopqrstuvwxyz0123456789-δ☃"


def _big_entry(seq: int) -> JournalEntry:
    text = (f"<{seq:02d}>" + _FILLER * 240)[:8192]
    return conf_entry(seq, blob=text, sentinel=f"sentinel-{seq}-end")


def _a1_append_atomicity(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        submitted = [_big_entry(seq) for seq in range(12)]
        expected = [stable_stringify(entry) for entry in submitted]
        done = threading.Event()

        def writer() -> None:
            try:
                for entry in submitted:
                    store.append(RUN, entry)
            finally:
                done.set()

        def reader() -> int:
            deadline = time.monotonic() + THREAD_TIMEOUT_S
            observations = 0
            while time.monotonic() < deadline:
                finished = done.is_set()
                seen = [stable_stringify(entry) for entry in store.load(RUN)]
                require(len(seen) <= 12, f"a load returned {len(seen)} entries of 12")
                for index, text in enumerate(seen):
                    require(
                        text == expected[index],
                        f"a concurrent load saw entry {index} differ from what was "
                        f"appended (partial or reordered write, {len(text)} chars)",
                    )
                observations += 1
                if finished:
                    return observations
            return observations

        outcomes = run_concurrently([writer, reader, reader])
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
        final = [stable_stringify(entry) for entry in store.load(RUN)]
        require(final == expected, f"final load has {len(final)} entries, not the 12")


# -- a2, a3, a4 ----------------------------------------------------------------


def _a2_total_order(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        initial = [conf_entry(seq) for seq in range(10)]
        for entry in initial:
            store.append(RUN, entry)
        require(
            same_json(store.load(RUN), initial),
            f"10 sequential appends loaded as seqs {seqs_of(store.load(RUN))}",
        )
        racers = [conf_entry(10 + index, writer=index) for index in range(8)]
        outcomes = run_concurrently(
            [partial(store.append, RUN, entry) for entry in racers]
        )
        for racer, outcome in zip(racers, outcomes, strict=True):
            if not outcome.ok:
                _require_order_violation(
                    outcome, f"concurrent append of seq {racer['seq']}"
                )
        first, second = store.load(RUN), store.load(RUN)
        require(same_json(first, second), "two loads after the race disagree")
        seqs = seqs_of(first)
        require(_strictly_increasing(seqs), f"seqs not strictly increasing: {seqs}")
        require(same_json(first[:10], initial), "the first 10 entries changed")
        winners = [r for r, o in zip(racers, outcomes, strict=True) if o.ok]
        require(
            same_json(first[10:], sorted(winners, key=lambda e: e["seq"])),
            f"after the race the journal holds seqs {seqs[10:]}, but the appends "
            f"that succeeded were {[w['seq'] for w in winners]}",
        )


def _a3_read_your_writes(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        for seq in range(5):
            entry = conf_entry(seq)
            store.append(RUN, entry)
            loaded = store.load(RUN)
            require(
                len(loaded) == seq + 1, f"after append {seq} load has {len(loaded)}"
            )
            require(
                same_json(loaded[-1], entry), f"after append {seq} the last differs"
            )


EXOTIC: Final = (
    '{"v":1,"seq":0,"scope":"par:0:1/wormhole","key":"k-exotic","ordinal":3,'
    '"kind":"wormhole.v9","status":"ok","value":{"unicode":"δοκιμή ☃ 🚀",'
    '"float":0.30000000000000004,"nested":{"deep":[1,2,{"three":null}]}},'
    '"futureField":{"shape":"unknown"},"spanId":"s",'
    '"startedAt":"2026-01-01T00:00:00.000Z"}'
)


def _a4_opaque_payload(stores: Fresh[JournalStore]) -> None:
    entry: JournalEntry = {
        "v": 1,
        "seq": 0,
        "scope": "par:0:1/wormhole",
        "key": "k-exotic",
        "ordinal": 3,
        "kind": "wormhole.v9",
        "status": "ok",
        "value": {
            "unicode": "δοκιμή ☃ 🚀",
            "float": 0.1 + 0.2,
            "nested": {"deep": [1, 2, {"three": None}]},
        },
        "futureField": {"shape": "unknown"},
        "spanId": "s",
        "startedAt": "2026-01-01T00:00:00.000Z",
    }
    with stores() as store:
        store.append(RUN, entry)
        loaded = store.load(RUN)
        require(len(loaded) == 1, f"load returned {len(loaded)} entries, not 1")
        require("hashVersion" not in loaded[0], "load injected 'hashVersion'")
        require(
            same_json(loaded[0], entry), f"payload changed: {dump_record(loaded[0])}"
        )
        require(dump_record(loaded[0]) == EXOTIC, "payload keys were reordered")


# -- a5 ------------------------------------------------------------------------


def _a5_monotonic_seq(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        store.append(RUN, conf_entry(0))
        store.append(RUN, conf_entry(1))
        for stale in (1, 0):
            outcome = attempt(partial(store.append, RUN, conf_entry(stale)))
            require(not outcome.ok, f"append of stale seq {stale} after 0,1 succeeded")
            _require_order_violation(outcome, f"append of stale seq {stale}")
        require(seqs_of(store.load(RUN)) == [0, 1], "a rejected append persisted")
        store.append(RUN, conf_entry(2))
        require(seqs_of(store.load(RUN)) == [0, 1, 2], "seq 2 did not land after 0,1")


def _one_winner(outcomes: Sequence[Outcome[Any]], what: str) -> int:
    winners = [index for index, outcome in enumerate(outcomes) if outcome.ok]
    require(len(winners) == 1, f"{what}: {len(winners)} of 2 racers persisted")
    _require_order_violation(outcomes[1 - winners[0]], f"{what}: the loser")
    return winners[0]


def _a5_stale_tail_race(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        for seq in range(3):
            store.append(RUN, conf_entry(seq))
        racers = [conf_entry(3, racer="left"), conf_entry(3, racer="right")]
        outcomes = run_concurrently(
            [partial(store.append, RUN, entry) for entry in racers]
        )
        winner = _one_winner(outcomes, "two appends of seq 3")
        loaded = store.load(RUN)
        seqs = seqs_of(loaded)
        require(seqs == [0, 1, 2, 3], f"after the race the seqs are {seqs}")
        require(same_json(loaded[3], racers[winner]), "seq 3 is not the winner's entry")


def _a5_stale_replayer_fencing(stores: Fresh[JournalStore]) -> None:
    with stores() as store:
        for seq in range(3):
            store.append(RUN, conf_entry(seq))
        both_loaded = threading.Barrier(2)

        def replayer(name: str) -> None:
            tail = max(seqs_of(store.load(RUN)))
            both_loaded.wait(THREAD_TIMEOUT_S)
            store.append(RUN, conf_entry(tail + 1, replayer=name))

        outcomes = run_concurrently([lambda: replayer("a"), lambda: replayer("b")])
        _one_winner(outcomes, "two replayers appending the same next seq")
        seqs = seqs_of(store.load(RUN))
        require(len(seqs) == 4, f"after the replay race the journal has seqs {seqs}")
        require(_strictly_increasing(seqs), f"seqs not strictly increasing: {seqs}")


# -- golden and oracles ----------------------------------------------------------


def _golden_fold_state(stores: Fresh[JournalStore]) -> None:
    journal = golden_fold_journal()
    with stores() as store:
        for entry in journal:
            store.append(RUN, entry)
        loaded = store.load(RUN)
    require(same_json(loaded, journal), "the golden journal did not round-trip")
    digest = fold_state_sha256(loaded)
    require(
        digest == GOLDEN_FOLD_STATE_SHA256,
        f"golden fold hash {digest} != {GOLDEN_FOLD_STATE_SHA256}; state "
        f"{stable_stringify(fold_state(loaded))}",
    )


def journal_store_conformance(mk: Mk) -> ConformanceSuite:
    """Build the journal suite over ``mk``, a factory of fresh isolated stores (C1)."""
    return _suite(each_fresh(mk))


def journal_suite(certification: Certification) -> ConformanceSuite:
    """Build the journal suite over the certification's fresh locations."""
    return _suite(partial(fresh_journal, certification, None))


def _suite(stores: Fresh[JournalStore]) -> ConformanceSuite:
    table: list[tuple[str, str, tuple[str, ...], Callable[[Fresh[JournalStore]], None]]] = [
        ("a1-append-atomicity", "no reader ever sees a partial or reordered entry",
         ("J1", "D1"), _a1_append_atomicity),
        ("a2-total-order", "concurrent appends serialize into one stable order",
         ("J2", "J6"), _a2_total_order),
        ("a3-read-your-writes", "an append is visible to the next load",
         ("J3",), _a3_read_your_writes),
        ("a4-opaque-payload", "payloads round-trip exactly; nothing is injected",
         ("J4", "D1", "D4"), _a4_opaque_payload),
        ("a5-monotonic-seq", "a seq not above the tail is refused and not stored",
         ("J6", "J8"), _a5_monotonic_seq),
        ("a5-stale-tail-race", "two racers with the same next seq: one persists",
         ("J6",), _a5_stale_tail_race),
        ("a5-stale-replayer-fencing", "two replayers of the same tail: one persists",
         ("J6", "J2"), _a5_stale_replayer_fencing),
        ("meta-separation", "meta upserts, filters, round-trips and deletes apart",
         ("J5", "M1", "M2", "M3", "M4", "M5", "M6", "D6", "D7"), meta_separation),
        ("golden-fold-state", "the golden journal folds to the golden hash",
         ("C5", "C3", "J4"), _golden_fold_state),
        ("decide-once-oracle", "two concurrent resolutions: exactly one applies",
         ("C5", "J2", "J6"), decide_once_oracle),
        ("abandon-derived-skip", "an abandon covers its subtree; nothing is orphaned",
         ("C5",), abandon_derived_skip),
    ]  # fmt: skip
    checks = tuple(
        build_check(check_id, title, clauses, partial(body, stores))
        for check_id, title, clauses, body in table
    )
    return ConformanceSuite("journal", checks)


SPEC: Final = SuiteSpec("journal", journal_suite, None, True, "journal and meta (8.2)")
