"""The failover judge on synthetic histories (issue 34, item 2): fast, no cluster.

Each history is built by hand: writer records as ``failover_writer`` logs them,
the driver's ``fault``/``promoted``/``healed`` records, and the journal the
surviving primary serves. The judge must count what a failover did and turn
losses into violations only in the modes that promise none.
"""

from __future__ import annotations

from typing import Any

import pytest

from rulvar_conformance.faults.failover_judge import PROMISED, judge_failover
from rulvar_conformance.soak.events import Event

S = 1_000_000_000


class History:
    """Writer records with the monotonic clock in seconds (``at``)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.calls = 0
        self.final: dict[str, list[dict[str, Any]]] = {"r0": [], "r1": []}

    def _id(self, writer: int) -> str:
        self.calls += 1
        return f"w{writer}-{self.calls}"

    def grant(self, writer: int, at: float, run: str, epoch: int) -> None:
        op = self._id(writer)
        self.events.append(
            {
                "t": "invoke",
                "w": writer,
                "ns": int(at * S),
                "id": op,
                "op": "acquire",
                "run": run,
            }
        )
        self.events.append(
            {
                "t": "grant",
                "w": writer,
                "ns": int(at * S) + 1,
                "id": op,
                "run": run,
                "epoch": epoch,
                "owner": f"o{writer}",
            }
        )

    def append(
        self,
        writer: int,
        at: float,
        run: str,
        epoch: int,
        *,
        survives: bool = True,
        outcome: str = "accept",
    ) -> str:
        op = self._id(writer)
        nonce = f"n-{op}"
        fields = {"run": run, "epoch": epoch, "nonce": nonce, "seq": self.calls}
        self.events.append(
            {
                "t": "invoke",
                "w": writer,
                "ns": int(at * S),
                "id": op,
                "op": "append",
                **fields,
            }
        )
        if outcome == "unknown":
            self.events.append(
                {
                    "t": "unknown",
                    "w": writer,
                    "ns": int(at * S) + 1,
                    "id": op,
                    "op": "append",
                    **fields,
                }
            )
        elif outcome == "error":
            self.events.append(
                {
                    "t": "error",
                    "w": writer,
                    "ns": int(at * S) + 1,
                    "id": op,
                    "op": "append",
                    "exc": "OperationalError",
                    "typed": False,
                }
            )
        else:
            self.events.append(
                {"t": "accept", "w": writer, "ns": int(at * S) + 1, "id": op, **fields}
            )
        if survives:
            self.final[run].append(
                {"seq": self.calls, "value": {"nonce": nonce, "epoch": epoch}}
            )
        return nonce


def faults(*specs: tuple[str, float, float | None, float]) -> list[Event]:
    """(kind, fault at, promoted at or None, healed at) per fault, in order."""
    out: list[Event] = []
    for n, (kind, at, promoted, healed) in enumerate(specs, start=1):
        out.append(
            {"t": "fault", "ns": int(at * S), "n": n, "kind": kind, "node": "n0"}
        )
        if promoted is not None:
            out.append(
                {"t": "promoted", "ns": int(promoted * S), "n": n, "leader": "n1"}
            )
        out.append({"t": "healed", "ns": int(healed * S), "n": n})
    return out


def clean_history() -> History:
    """Two writers; a kill at t=10 promoted at 30; both write durably after it."""
    h = History()
    h.grant(0, 1, "r0", 1)
    h.append(0, 2, "r0", 1)
    h.grant(1, 1, "r1", 1)
    h.append(1, 3, "r1", 1)
    h.append(0, 31, "r0", 1)
    h.append(1, 32.5, "r1", 1)
    return h


@pytest.mark.clause("H1")
@pytest.mark.clause("H6")
def test_a_clean_failover_has_every_figure_at_zero_and_times_each_writers_recovery() -> (
    None
):
    h = clean_history()
    verdict = judge_failover(
        h.events, faults(("kill", 10, 30, 40)), h.final, mode="sync-strict", stop_ns=50 * S,
        planned={"kill": 1},
    )  # fmt: skip
    assert verdict.violations == []
    fig = verdict.figures
    assert (
        fig["acknowledged_writes_lost"],
        fig["epochs_reissued"],
        fig["stale_writes_landed"],
    ) == (0, 0, 0)
    kill = fig["faults"]["kill"]
    assert kill["fault_to_promotion_s"] == [20.0]
    assert kill["fault_to_every_writer_s"] == [22.5]  # the slower writer sets it
    assert kill["promotion_to_every_writer_s"] == [2.5]


@pytest.mark.clause("H1")
@pytest.mark.clause("H4")
def test_a_lost_acknowledgement_is_a_violation_where_the_mode_promises_none() -> None:
    h = clean_history()
    h.append(0, 12, "r0", 1, survives=False)  # acknowledged during the fault, gone
    h.append(1, 35, "r1", 1, survives=False)  # acknowledged after the promotion, gone
    for mode in sorted(PROMISED):
        verdict = judge_failover(
            h.events, faults(("zombie", 10, 30, 40)), h.final, mode=mode, stop_ns=50 * S
        )
        assert verdict.figures["acknowledged_writes_lost"] == 2
        assert verdict.figures["lost_acknowledged_after_promotion"] == 1
        assert verdict.figures["faults"]["zombie"]["acknowledged_lost"] == 2
        assert any(
            v.startswith("ACKNOWLEDGED WRITES LOST: 2") for v in verdict.violations
        )
        assert any(
            v.startswith("WRITES ACKNOWLEDGED BY A DEMOTED PRIMARY: 1")
            for v in verdict.violations
        )


@pytest.mark.clause("H7")
def test_async_shows_the_loss_and_does_not_fail_for_it() -> None:
    h = clean_history()
    h.append(0, 12, "r0", 1, survives=False)
    verdict = judge_failover(
        h.events, faults(("kill", 10, 30, 40)), h.final, mode="async", stop_ns=50 * S
    )
    assert verdict.violations == []
    assert verdict.figures["acknowledged_writes_lost"] == 1
    assert (
        "acknowledged writes lost",
        "1 (0 acknowledged by a demoted primary after the promotion)",
    ) in verdict.rows


@pytest.mark.clause("H6")
def test_a_write_the_failover_lost_is_no_recovery() -> None:
    """Writer 1's only post-fault acknowledgement came from the zombie and is gone."""
    h = History()
    h.grant(0, 1, "r0", 1)
    h.append(0, 2, "r0", 1)
    h.grant(1, 1, "r1", 1)
    h.append(1, 12, "r1", 1, survives=False)
    h.append(0, 31, "r0", 1)
    h.append(1, 100, "r1", 1)
    verdict = judge_failover(
        h.events, faults(("zombie", 10, 30, 40)), h.final, mode="async", stop_ns=110 * S
    )
    assert verdict.figures["faults"]["zombie"]["fault_to_every_writer_s"] == [90.0]


@pytest.mark.clause("H2")
def test_an_epoch_granted_again_after_a_rollback_is_counted_and_refused_in_quorum() -> (
    None
):
    h = clean_history()
    h.grant(0, 12, "r0", 2)  # on the old primary, rolled back
    h.grant(1, 33, "r0", 2)  # the same epoch again on the new one
    h.grant(0, 34, "r1", 2)
    quorum = judge_failover(
        h.events, faults(("kill", 10, 30, 40)), h.final, mode="quorum", stop_ns=50 * S
    )
    assert quorum.figures["epochs_reissued"] == 1
    assert any(v.startswith("EPOCHS HANDED OUT TWICE: 1") for v in quorum.violations)
    measured = judge_failover(
        h.events, faults(("kill", 10, 30, 40)), h.final, mode="sync", stop_ns=50 * S
    )
    assert measured.figures["epochs_reissued"] == 1
    assert measured.violations == []


@pytest.mark.clause("H3")
def test_a_superseded_owners_write_on_the_surviving_timeline_is_stale() -> None:
    h = clean_history()
    h.grant(1, 33, "r0", 5)  # another owner is acknowledged a higher epoch
    h.append(0, 34, "r0", 1)  # then the old holder's append lands
    verdict = judge_failover(
        h.events,
        faults(("isolate", 10, 30, 40)),
        h.final,
        mode="sync-strict",
        stop_ns=50 * S,
    )
    assert verdict.figures["stale_writes_landed"] == 1
    assert any(v.startswith("STALE WRITES LANDED: 1") for v in verdict.violations)


@pytest.mark.clause("H3")
def test_a_journal_falling_back_to_a_lower_epoch_is_stale_even_without_a_logged_grant() -> (
    None
):
    h = clean_history()
    h.final["r1"] = [
        {"seq": 1, "value": {"nonce": "a", "epoch": 4}},
        {"seq": 2, "value": {"nonce": "b", "epoch": 3}},
    ]
    verdict = judge_failover(h.events, [], h.final, mode="async", stop_ns=50 * S)
    assert verdict.figures["stale_writes_landed"] == 1


@pytest.mark.clause("H5")
def test_unknown_outcomes_resolve_from_the_surviving_timeline() -> None:
    h = clean_history()
    h.append(0, 11, "r0", 1, outcome="unknown", survives=True)
    h.append(1, 11, "r1", 1, outcome="unknown", survives=False)
    h.events.append(
        {"t": "unknown", "w": 0, "ns": 12 * S, "id": "x", "op": "acquire", "run": "r0"}
    )
    refused = "acquire on postgresql://h1,h2/db: could not connect to the server (x)"
    h.events.append(
        {
            "t": "unknown",
            "w": 1,
            "ns": 13 * S,
            "id": "y",
            "op": "acquire",
            "detail": refused,
        }
    )
    verdict = judge_failover(
        h.events,
        faults(("switchover", 10, 11, 15)),
        h.final,
        mode="sync-strict",
        stop_ns=50 * S,
    )
    unknown = verdict.figures["unknown_outcomes"]
    assert unknown["count"] == 4
    assert unknown["resolved"] == {
        "append": {"applied": 1, "not applied": 1},
        "acquire": {"lease lapses at its ttl": 1, "no server reached, nothing sent": 1},
    }
    assert (
        verdict.figures["acknowledged_writes_lost"] == 0
    )  # unknown is never counted as lost


@pytest.mark.clause("H6")
def test_no_promotion_an_untyped_exception_a_hung_writer_and_too_few_faults_are_violations() -> (
    None
):
    h = clean_history()
    h.append(1, 33, "r1", 1, outcome="error", survives=False)
    verdict = judge_failover(
        h.events, faults(("kill", 10, None, 40)), h.final, mode="async", stop_ns=50 * S,
        hung=[1], planned={"kill": 1, "zombie": 2},
    )  # fmt: skip
    lines = verdict.violations
    assert any(v.startswith("NO PROMOTION: fault 1 (kill") for v in lines)
    assert any(
        v.startswith("UNTYPED EXCEPTIONS: {'append: OperationalError': 1}")
        for v in lines
    )
    assert any(v.startswith("HUNG WRITERS: [1]") for v in lines)
    assert any(v == "TOO FEW FAULTS: zombie 0 of 2" for v in lines)


@pytest.mark.clause("H6")
def test_a_writer_silent_long_after_a_promotion_never_recovered() -> None:
    h = History()
    h.grant(0, 1, "r0", 1)
    h.append(0, 2, "r0", 1)
    h.events.append(
        {
            "t": "unknown",
            "w": 0,
            "ns": 200 * S,
            "id": "late",
            "op": "acquire",
            "run": "r0",
        }
    )
    verdict = judge_failover(
        h.events,
        faults(("kill", 10, 30, 40)),
        h.final,
        mode="sync-strict",
        stop_ns=210 * S,
    )
    assert any(v.startswith("NO RECOVERY: writer 0") for v in verdict.violations)


@pytest.mark.clause("H6")
def test_recovery_from_the_promotion_counts_the_first_durable_write_after_it() -> None:
    """A zombie's own durable writes before the promotion are no recovery from it."""
    h = History()
    h.grant(0, 1, "r0", 1)
    h.append(0, 2, "r0", 1)
    h.append(0, 15, "r0", 1)  # durable, between the fault and the promotion
    h.append(0, 34, "r0", 1)
    verdict = judge_failover(
        h.events, faults(("zombie", 10, 30, 40)), h.final, mode="quorum", stop_ns=50 * S
    )
    zombie = verdict.figures["faults"]["zombie"]
    assert zombie["fault_to_every_writer_s"] == [5.0]
    assert zombie["promotion_to_every_writer_s"] == [4.0]


@pytest.mark.clause("H6")
def test_a_writer_slower_than_the_target_after_a_promotion_is_reported_not_failed() -> (
    None
):
    h = History()
    h.grant(0, 1, "r0", 1)
    h.append(0, 2, "r0", 1)
    h.append(0, 37, "r0", 1)  # 7 s after the promotion
    verdict = judge_failover(
        h.events,
        faults(("zombie", 10, 30, 40)),
        h.final,
        mode="sync-strict",
        stop_ns=50 * S,
    )
    assert verdict.figures["recovery_target"]["missed"] == ["fault 1 (zombie): 7.0 s"]
    assert (
        "every writer durable within 5 s of each promotion",
        "no: fault 1 (zombie): 7.0 s",
    ) in verdict.rows
    assert verdict.violations == []
