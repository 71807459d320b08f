"""The error tree of CONTRACT 1.6: codes, retryability, fields, pickling."""

from __future__ import annotations

import pickle

import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    JournalOrderViolation,
    LeaseHeldError,
    MissingExtraError,
    RulvarError,
    SettlementError,
    StoreBusyError,
    StoreUnavailableError,
    SupersededError,
)

ALL_ERRORS: list[RulvarError] = [
    ConfigError("bad option"),
    MissingExtraError("needs apsw: pip install 'rulvar-stores[sqlite]'", "apsw"),
    ContractError("meta without runId"),
    JournalOrderViolation("seq 1 not above tail", "run-a", 1),
    LeaseHeldError("not the live lease", "run-a", "owner-1", 7),
    SettlementError("meta write failed", "run-a", "ok", "meta"),
    SupersededError("successor owns the run", "run-a", "ok"),
    StoreBusyError("database is locked", "append"),
    StoreUnavailableError("connection refused", "acquire"),
]

EXPECTED_CODES = {
    ConfigError: ("config", False),
    MissingExtraError: ("config", False),
    ContractError: ("contract", False),
    JournalOrderViolation: ("journal_order_violation", False),
    LeaseHeldError: ("lease_held", True),
    SettlementError: ("settlement", True),
    SupersededError: ("superseded", False),
    StoreBusyError: ("store_busy", True),
    StoreUnavailableError: ("store_unavailable", True),
}


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_fields(error: RulvarError) -> None:
    """Soak and kill-point children send errors across processes (CONTRACT 1.6)."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy.args == error.args
    assert copy.to_wire() == error.to_wire()
    assert vars(copy) == vars(error)


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_has_the_contract_code_and_retryability(error: RulvarError) -> None:
    code, retryable = EXPECTED_CODES[type(error)]
    assert error.code == code
    assert error.retryable is retryable
    assert isinstance(error, RulvarError)


def test_lease_held_error_carries_run_owner_and_epoch_in_data() -> None:
    error = LeaseHeldError("stale", "run-a", "owner-1", 3)
    assert error.data == {"runId": "run-a", "owner": "owner-1", "epoch": 3}
    assert str(error) == "stale"


def test_settlement_errors_carry_the_wire_data_of_the_contract() -> None:
    assert SettlementError("x", "r", "ok", "run-settle").data == {
        "runId": "r",
        "runStatus": "ok",
        "stage": "run-settle",
    }
    assert SupersededError("x", "r", "error").data == {
        "runId": "r",
        "runStatus": "error",
    }


def test_journal_order_violation_is_a_contract_error() -> None:
    """A seq violation is a caller bug, grouped with the other contract breaks."""
    assert issubclass(JournalOrderViolation, ContractError)
