"""The intake's error classes: where they sit in the tree, codes, retryability, pickling."""

from __future__ import annotations

import pickle

import pytest

from rulvar_store import (
    ContractError,
    ForkedStoreError,
    InvalidArgumentError,
    JournalOrderViolation,
    LeaseHeldError,
    LeaseRunMismatchError,
    NotJsonError,
    RulvarError,
    StoreClosedError,
    UnsafeNameError,
)

ERRORS: list[tuple[RulvarError, str, tuple[type[BaseException], ...]]] = [
    (
        InvalidArgumentError("append: run_id must not be empty", "append", "run_id"),
        "invalid_argument",
        (ContractError,),
    ),
    (
        NotJsonError("append: entry['v'] is a set", "append", "entry"),
        "not_json",
        (InvalidArgumentError, TypeError, ValueError),
    ),
    (
        UnsafeNameError("load: run_id: unsafe run id 'a b'", "load", "run_id"),
        "unsafe_name",
        (InvalidArgumentError, JournalOrderViolation),
    ),
    (
        StoreClosedError("load: the store is closed", "load"),
        "store_closed",
        (ContractError,),
    ),
    (
        ForkedStoreError("append: the store was opened before a fork", "append"),
        "forked_store",
        (ContractError,),
    ),
    (
        LeaseRunMismatchError(
            "append of run 'b' presented a lease for 'a'", "b", "o", 3
        ),
        "lease_held",
        (LeaseHeldError,),
    ),
]


@pytest.mark.parametrize(
    ("error", "code", "bases"), ERRORS, ids=lambda e: type(e).__name__
)
def test_new_errors_are_permanent_typed_and_pickle(
    error: RulvarError, code: str, bases: tuple[type[BaseException], ...]
) -> None:
    """Soak and kill-point children send errors across processes with their fields."""
    assert error.code == code
    assert error.retryable is False
    for base in bases:
        assert isinstance(error, base)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert vars(copy) == vars(error)
    assert copy.to_wire() == error.to_wire()
