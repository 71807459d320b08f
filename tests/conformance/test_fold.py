"""The C5 resolution fold and the frozen golden fixture of CONTRACT 8.4."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rulvar_conformance import (
    GOLDEN_FOLD_JOURNAL,
    GOLDEN_FOLD_STATE_SHA256,
    fold_journal,
    fold_state,
    fold_state_sha256,
    golden_fold_journal,
)
from rulvar_conformance.golden import GOLDEN_FOLD_STATE_JSON
from rulvar_store import JournalOrderViolation
from rulvar_store.backend import stable_stringify


def entry(
    seq: int, kind: str, status: str, scope: str = "", **rest: Any
) -> dict[str, Any]:
    return {"seq": seq, "scope": scope, "kind": kind, "status": status, **rest}


def resolution(seq: int, target: int, value: Any = None, **rest: Any) -> dict[str, Any]:
    body = {"target": target, "by": "external", "value": value}
    return entry(seq, "resolution", "ok", ref=target, resolution=body, **rest)


def abandon(seq: int, target: int, scope: str = "") -> dict[str, Any]:
    body = {"target": target, "authorizedBy": 0, "reason": "test"}
    return entry(seq, "abandon", "ok", scope, ref=target, abandon=body)


@pytest.mark.clause("C5")
@pytest.mark.clause("C3")
def test_golden_journal_folds_to_the_published_state_and_hash() -> None:
    """The golden fold reproduces 8.4's canonical JSON byte for byte and its sha256."""
    assert stable_stringify(fold_state(GOLDEN_FOLD_JOURNAL)) == GOLDEN_FOLD_STATE_JSON
    assert fold_state_sha256(GOLDEN_FOLD_JOURNAL) == GOLDEN_FOLD_STATE_SHA256
    assert GOLDEN_FOLD_STATE_SHA256 == (
        "81e6ccff549fb3e6c1de4d34ba65b912162eba6f66403b5d5f23a3e1ec69243c"
    )


@pytest.mark.clause("C5")
def test_golden_fixture_entries_match_the_table() -> None:
    """Envelope and timestamps follow 8.4: golden-<seq> keys, 2023-11-14T22:13:2x."""
    journal = golden_fold_journal()
    assert [e["seq"] for e in journal] == list(range(10))
    assert journal[0]["startedAt"] == "2023-11-14T22:13:20.000Z"
    assert journal[9]["startedAt"] == "2023-11-14T22:13:29.000Z"
    assert all(
        e["hashVersion"] == 2 and e["key"] == f"golden-{e['seq']}" for e in journal
    )
    assert journal[6]["abandon"] == {
        "target": 0,
        "authorizedBy": 0,
        "reason": "golden abandon",
    }
    round_tripped = json.loads(json.dumps(journal))
    assert fold_state_sha256(round_tripped) == GOLDEN_FOLD_STATE_SHA256


def test_golden_fixture_is_frozen_and_copies_are_fresh() -> None:
    """The fixture cannot be edited in place; each copy is independent."""
    with pytest.raises(TypeError):
        GOLDEN_FOLD_JOURNAL[0]["seq"] = 5  # type: ignore[index]  # proving it is read-only
    first = golden_fold_journal()
    first[1]["value"]["key"] = "tampered"
    assert golden_fold_journal()[1]["value"]["key"] == "gate-a"


@pytest.mark.clause("C5")
@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(
            {"seq": 1, "kind": "resolution", "status": "ok"}, id="ref-missing"
        ),
        pytest.param(resolution(1, 1) | {"ref": 1}, id="ref-not-below-seq"),
        pytest.param(resolution(1, 0) | {"ref": 5}, id="ref-above-seq"),
        pytest.param(abandon(3, 2), id="ref-names-no-entry"),
        pytest.param(abandon(1, 0) | {"ref": True}, id="ref-is-bool"),
        pytest.param(resolution(1, 0) | {"seq": None}, id="entry-without-seq"),
    ],
)
def test_bad_ref_raises_journal_order_violation(bad: dict[str, Any]) -> None:
    """C5 step 2: a ref entry needs ``ref < seq`` naming an existing seq."""
    journal = [entry(0, "external", "suspended"), bad]
    with pytest.raises(JournalOrderViolation):
        fold_state(journal)


def test_repeated_seq_raises_journal_order_violation() -> None:
    """A journal with one seq twice cannot be folded."""
    with pytest.raises(JournalOrderViolation):
        fold_state([entry(0, "step", "ok"), entry(0, "step", "ok")])


@pytest.mark.clause("C5")
def test_schema_failure_is_invalid_and_leaves_the_target_open() -> None:
    """A value failing the target's JSON Schema 2020-12 is invalid; a later one applies."""
    schema = {
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
    }
    journal = [
        entry(0, "external", "suspended", value={"schema": schema}, deadlineAt="soon"),
        resolution(1, 0, {"n": "one"}),
    ]
    fold = fold_journal(journal)
    assert fold.classifications[1].verdict == "invalid"
    assert fold.suspension_state(0) == {"state": "suspended", "deadlineAt": "soon"}
    assert fold.open_suspensions() == [0]
    fold = fold_journal([*journal, resolution(2, 0, {"n": 1})])
    assert fold.suspension_state(0) == {"state": "resolved", "by": 2, "value": {"n": 1}}
    assert fold.open_suspensions() == []


@pytest.mark.clause("C5")
def test_resolution_of_a_non_suspension_is_invalid() -> None:
    """Resolving an entry that is not suspended classifies ``invalid``."""
    state = fold_state([entry(0, "step", "ok"), resolution(1, 0, 1)])
    assert state["classifications"] == {"1": {"classification": "invalid"}}


@pytest.mark.clause("C5")
def test_abandon_closes_open_suspensions_under_the_child_scope() -> None:
    """A child's ``value.childScope`` is the covered prefix; open gates inside close."""
    journal = [
        entry(0, "child", "running", value={"childScope": "kid"}),
        entry(1, "approval", "suspended", "kid/agent:4"),
        entry(2, "external", "suspended", "kidney"),
        abandon(3, 0),
        resolution(4, 1, True),
    ]
    state = fold_state(journal)
    assert state["suspensions"]["1"] == {"state": "abandoned", "by": 3}
    assert state["suspensions"]["2"] == {"state": "suspended"}
    assert state["abandoned"] == {
        "0": True,
        "1": True,
        "2": False,
        "3": False,
        "4": False,
    }
    assert state["classifications"]["4"] == {
        "classification": "noop",
        "reason": "target_abandoned",
        "supersededBy": 3,
    }


@pytest.mark.clause("C5")
def test_fold_reads_its_input_without_mutating_it() -> None:
    """Folding leaves the caller's entries untouched."""
    journal = golden_fold_journal()
    before = stable_stringify(journal)
    fold_state(journal)
    assert stable_stringify(journal) == before
