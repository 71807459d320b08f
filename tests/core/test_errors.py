"""The error tree of CONTRACT 1.6: codes, retryability, fields, pickling."""

from __future__ import annotations

import pickle

import pytest

from rulvar_store import (
    ConfigError,
    ContractError,
    JournalOrderViolation,
    LeaseHeldError,
    LeaseLostError,
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
    LeaseHeldError("run-a is leased by owner-1", "run-a", "owner-1", 7, 1500),
    LeaseLostError("lost run-a", "run-a", "owner-1", 7, "expired"),
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
    LeaseLostError: ("lease_lost", True),
    SettlementError: ("settlement", True),
    SupersededError: ("superseded", False),
    StoreBusyError: ("store_busy", True),
    StoreUnavailableError: ("store_unavailable", True),
}


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: f"{type(e).__name__}:{e}")
def test_every_error_pickles_with_its_fields(error: RulvarError) -> None:
    """Soak and kill-point children send errors across processes (CONTRACT 1.6)."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy.args == error.args
    assert copy.to_wire() == error.to_wire()
    assert vars(copy) == vars(error)


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: f"{type(e).__name__}:{e}")
def test_every_error_has_the_contract_code_and_retryability(error: RulvarError) -> None:
    code, retryable = EXPECTED_CODES[type(error)]
    assert error.code == code
    assert error.retryable is retryable
    assert isinstance(error, RulvarError)


def test_lease_held_error_carries_run_owner_and_epoch_in_data() -> None:
    error = LeaseHeldError("stale", "run-a", "owner-1", 3)
    assert error.data == {
        "runId": "run-a",
        "owner": "owner-1",
        "epoch": 3,
        "retryAfterMs": None,
    }
    assert str(error) == "stale"


def test_lease_held_error_tells_the_holder_and_when_its_lease_expires() -> None:
    error = LeaseHeldError("held", "run-a", "worker-2", 4, 1500)
    assert (error.holder, error.epoch, error.retry_after_ms) == ("worker-2", 4, 1500)
    assert error.data["retryAfterMs"] == 1500


def test_lease_lost_error_is_a_lease_held_error_with_its_reason() -> None:
    """A hold's loss (L10) is caught by every handler of LeaseHeldError."""
    error = LeaseLostError("lost", "run-a", "worker-1", 2, "refused")
    assert isinstance(error, LeaseHeldError)
    assert error.reason == "refused"
    assert error.data == {
        "runId": "run-a",
        "owner": "worker-1",
        "epoch": 2,
        "retryAfterMs": None,
        "reason": "refused",
    }


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
